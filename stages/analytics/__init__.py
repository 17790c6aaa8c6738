"""The analytics stage: counting lines, zones with dwell and crowding, per source."""
