import os
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED = pathlib.Path(os.environ.get("KGROUP_SHARED", ROOT.parent / "shared"))
SPEC = SHARED / "kafka-spec"
