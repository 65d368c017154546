"""README's two set-up commands stay true: CI runs the test one, the example file exists."""

import pathlib
import re

ROOT = pathlib.Path(__file__).parents[1]


def _commands():
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start")[1].split("\n## ")[0]
    return re.findall(r"```bash\n(.+?)\n```", quick)


def test_two_commands_main_and_tests():
    main, tests = _commands()
    assert "gridsample-lower lower testdata/" in main
    assert (ROOT / re.search(r"testdata/\S+", main).group()).exists()
    assert tests in (ROOT / ".ci" / "run").read_text()
