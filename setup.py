"""Packaging beyond pyproject.toml: install ``llmload-locust-help.pth`` next to the package, so
``locust -f LOCUSTFILE --help`` lists llmload's options (see llmload_locust_help.py).

Every install path carries it: a wheel or ``pip install .`` through ``build_py``, and an editable
install (``pip install -e .``) through ``editable_wheel``, whose wheel holds only a path hook and
the package's metadata unless told otherwise.
"""

import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

PTH = "llmload-locust-help.pth"
HERE = os.path.dirname(os.path.abspath(__file__))


class BuildPyWithPth(build_py):
    def run(self) -> None:
        super().run()
        self.copy_file(os.path.join(HERE, PTH), os.path.join(self.build_lib, PTH))

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        return [*super().get_outputs(include_bytecode), os.path.join(self.build_lib, PTH)]


commands = {"build_py": BuildPyWithPth}
try:
    from setuptools.command.editable_wheel import editable_wheel
except ImportError:  # setuptools before PEP 660: `setup.py develop` has no wheel to add to
    editable_wheel = None

if editable_wheel is not None:
    class EditableWheelWithPth(editable_wheel):
        # The files under the unpacked wheel's root are installed into site-packages as they are;
        # this is the step that writes setuptools' own namespace .pth files there.
        def _install_namespaces(self, installation_dir, pth_prefix):  # noqa: ANN001
            super()._install_namespaces(installation_dir, pth_prefix)
            shutil.copy(os.path.join(HERE, PTH), os.path.join(installation_dir, PTH))

    commands["editable_wheel"] = EditableWheelWithPth

setup(cmdclass=commands)
