"""A weight average ("model soup") of planners fine-tuned from the same start, as a planner folder.

GRPO seeds trained from one SFT planner stay close in weight space (``grpo23`` and ``grpo23s1``
differ by 6e-5 per weight on average), so their uniform average is itself a planner; this
script writes it for ``compare_planners.py`` to score (docs/benchmarks.md, twenty-fourth
session). The first planner's folder supplies tokenizer, config and ``mera_planner.json``
(with the averaged folders added under ``averaged_from``).

    python benchmarks/average_planners.py --planner <folder A> --planner <folder B> --out <folder>
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

WEIGHTS = "model.safetensors"
METADATA = "mera_planner.json"


def average_planners(folders: list[Path], out: Path) -> Path:
    from safetensors.torch import load_file, save_file

    if len(folders) < 2:
        raise SystemExit("give at least two --planner folders to average")
    states = [load_file(str(folder / WEIGHTS)) for folder in folders]
    keys = set(states[0])
    for folder, state in zip(folders[1:], states[1:], strict=True):
        if set(state) != keys or any(state[k].shape != states[0][k].shape for k in keys):
            raise SystemExit(f"{folder}: not the same architecture as {folders[0]}")
    if out.exists():
        raise SystemExit(f"{out} exists; choose a new folder")
    shutil.copytree(folders[0], out)
    averaged = {
        key: (sum(state[key].float() for state in states) / len(states))
        .to(states[0][key].dtype)
        .contiguous()
        for key in keys
    }
    save_file(averaged, str(out / WEIGHTS), metadata={"format": "pt"})
    metadata_path = out / METADATA
    if metadata_path.is_file():
        metadata = json.loads(metadata_path.read_text())
        metadata["averaged_from"] = [str(folder) for folder in folders]
        metadata_path.write_text(json.dumps(metadata, indent=2))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--planner", action="append", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    print(average_planners(args.planner, args.out))


if __name__ == "__main__":
    main()
