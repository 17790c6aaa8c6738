"""A constant-velocity Kalman filter over boxes, run on every track of a source at once.

State per track: centre x, centre y, aspect ratio w/h, height, and their velocities per frame
(the model of SORT, DeepSORT and ByteTrack). Noise scales with the box height, so a near car
and a far one are equally sure of themselves. Arrays hold all tracks: ``mean`` (N, 8) and
``cov`` (N, 8, 8), so one frame's predict and update are a few batched numpy calls.
"""

from __future__ import annotations

import numpy as np

STD_POSITION = 1.0 / 20
STD_VELOCITY = 1.0 / 160

_MOTION = np.eye(8)
_MOTION[:4, 4:] = np.eye(4)


def xyxy_to_xyah(boxes: np.ndarray) -> np.ndarray:
    width = boxes[:, 2] - boxes[:, 0]
    height = np.maximum(boxes[:, 3] - boxes[:, 1], 1e-6)
    return np.stack(
        ((boxes[:, 0] + boxes[:, 2]) / 2, (boxes[:, 1] + boxes[:, 3]) / 2, width / height, height),
        axis=1,
    )


def xyah_to_xyxy(state: np.ndarray) -> np.ndarray:
    height = state[:, 3]
    width = state[:, 2] * height
    return np.stack(
        (
            state[:, 0] - width / 2,
            state[:, 1] - height / 2,
            state[:, 0] + width / 2,
            state[:, 1] + height / 2,
        ),
        axis=1,
    )


def initiate(boxes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """New tracks at ``boxes`` (xyxy, N x 4), not moving yet."""
    measured = xyxy_to_xyah(boxes.astype(np.float64))
    mean = np.concatenate((measured, np.zeros_like(measured)), axis=1)
    height = measured[:, 3:4]
    std = np.concatenate(
        (
            2 * STD_POSITION * height,
            2 * STD_POSITION * height,
            np.full_like(height, 1e-2),
            2 * STD_POSITION * height,
            10 * STD_VELOCITY * height,
            10 * STD_VELOCITY * height,
            np.full_like(height, 1e-5),
            10 * STD_VELOCITY * height,
        ),
        axis=1,
    )
    return mean, _diagonal(std**2)


def predict(mean: np.ndarray, cov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every track one frame ahead."""
    if len(mean) == 0:
        return mean, cov
    height = mean[:, 3]
    std = np.empty((len(mean), 8))
    std[:, [0, 1, 3]] = (STD_POSITION * height)[:, None]
    std[:, [4, 5, 7]] = (STD_VELOCITY * height)[:, None]
    std[:, 2], std[:, 6] = 1e-2, 1e-5
    mean = mean @ _MOTION.T
    cov = _MOTION @ cov @ _MOTION.T
    index = np.arange(8)
    cov[:, index, index] += std**2
    return mean, cov


def update(mean: np.ndarray, cov: np.ndarray, boxes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Correct each track with its matched box (xyxy, one row per track)."""
    measured = xyxy_to_xyah(boxes.astype(np.float64))
    height = mean[:, 3:4]
    std = np.concatenate(
        (
            STD_POSITION * height,
            STD_POSITION * height,
            np.full_like(height, 1e-1),
            STD_POSITION * height,
        ),
        axis=1,
    )
    projected_mean = mean[:, :4]
    projected_cov = cov[:, :4, :4] + _diagonal(std**2)
    cross = cov[:, :, :4]  # cov @ H.T
    # gain = cross @ inv(projected_cov), solved rather than inverted
    gain = np.linalg.solve(projected_cov, cross.transpose(0, 2, 1)).transpose(0, 2, 1)
    innovation = measured - projected_mean
    new_mean = mean + np.einsum("nij,nj->ni", gain, innovation)
    new_cov = cov - gain @ projected_cov @ gain.transpose(0, 2, 1)
    return new_mean, new_cov


def boxes_of(mean: np.ndarray) -> np.ndarray:
    return xyah_to_xyxy(mean[:, :4]) if len(mean) else np.zeros((0, 4))


def _diagonal(values: np.ndarray) -> np.ndarray:
    out = np.zeros((*values.shape, values.shape[-1]))
    index = np.arange(values.shape[-1])
    out[..., index, index] = values
    return out
