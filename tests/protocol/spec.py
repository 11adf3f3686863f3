"""Reading Kafka's JSON specs (tests only; the project never reads them at run time)."""
import json
import re

from tests.conftest import SPEC


def load_spec(name: str, folder: str = "messages") -> dict:
    text = (SPEC / folder / f"{name}.json").read_text()
    return json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.M))
