"""The events room: what an event is and where it goes, shared by the event sinks, the
service, the shards and the Python API. ``records`` turns frames and messages into the JSON
objects every sink writes (docs/events.md); ``store`` keeps them in SQLite; ``outbox`` holds
them for a slow peer; ``http_post`` is the webhook's HTTP client."""
