"""Packaging beyond pyproject.toml: install ``llmload-locust-help.pth`` next to the package, so
``locust -f LOCUSTFILE --help`` lists llmload's options (see llmload_locust_help.py). Editable
installs do not carry build outputs outside the package; ``make venv`` copies the file there."""

import os

from setuptools import setup
from setuptools.command.build_py import build_py

PTH = "llmload-locust-help.pth"


class BuildPyWithPth(build_py):
    def run(self) -> None:
        super().run()
        self.copy_file(PTH, os.path.join(self.build_lib, PTH))

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        return [*super().get_outputs(include_bytecode), os.path.join(self.build_lib, PTH)]


setup(cmdclass={"build_py": BuildPyWithPth})
