"""Write a tiny random-weight LeRobot ACT checkpoint the way lerobot-train saves one.

Runs with the Python of a venv that has lerobot (tests/test_lerobot_bridge.py):

    python make_lerobot_checkpoint.py OUT_DIR [--state-dim 9] [--chunk 10] [--steps 5]

ACT builds offline (``pretrained_backbone_weights=None``: no torchvision download);
SmolVLA cannot, it fetches its VLM config by hub id. The folder gets what a training
checkpoint's ``pretrained_model`` holds: config.json, model.safetensors and the pre-
and post-processors with their normalization stats. The stats are printed as JSON so
the test can check the bridge's preprocessed state against them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from lerobot.configs.types import FeatureType, PolicyFeature
from lerobot.policies.act.configuration_act import ACTConfig
from lerobot.policies.act.modeling_act import ACTPolicy
from lerobot.policies.factory import make_pre_post_processors

IMAGES = ("observation.images.image", "observation.images.image2")  # LeRobot's LIBERO names


def stats(state_dim: int) -> dict[str, dict[str, torch.Tensor]]:
    """Distinct per-value mean/std, so a normalization that was not loaded shows."""
    image = {"mean": torch.tensor([0.4, 0.5, 0.6]).reshape(3, 1, 1),
             "std": torch.tensor([0.2, 0.25, 0.3]).reshape(3, 1, 1)}
    return {
        **{key: dict(image) for key in IMAGES},
        "observation.state": {"mean": torch.linspace(-0.5, 0.5, state_dim),
                              "std": torch.linspace(0.5, 1.5, state_dim)},
        # Small std: random weights then stay well inside the [-1, 1] action range.
        "action": {"mean": torch.zeros(7), "std": torch.full((7,), 0.05)},
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--state-dim", type=int, default=9)
    parser.add_argument("--chunk", type=int, default=10)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    torch.manual_seed(0)
    config = ACTConfig(
        input_features={
            **{key: PolicyFeature(FeatureType.VISUAL, (3, 256, 256)) for key in IMAGES},
            "observation.state": PolicyFeature(FeatureType.STATE, (args.state_dim,)),
        },
        output_features={"action": PolicyFeature(FeatureType.ACTION, (7,))},
        chunk_size=args.chunk, n_action_steps=args.steps, pretrained_backbone_weights=None,
        dim_model=32, n_heads=2, dim_feedforward=64, n_encoder_layers=1, n_decoder_layers=1,
        use_vae=False, device="cpu",
    )
    policy = ACTPolicy(config)
    dataset_stats = stats(args.state_dim)
    preprocessor, postprocessor = make_pre_post_processors(config, dataset_stats=dataset_stats)
    args.out.mkdir(parents=True, exist_ok=True)
    policy.save_pretrained(args.out)
    preprocessor.save_pretrained(args.out)
    postprocessor.save_pretrained(args.out)
    print(json.dumps({key: {k: v.reshape(-1).tolist() for k, v in value.items()}
                      for key, value in dataset_stats.items() if key == "observation.state"}))


if __name__ == "__main__":
    main()
