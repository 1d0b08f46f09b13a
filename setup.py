"""Build script: compiles the Cython core (jgpy/_core/*.pyx) with optimisation on.

Environment:
  JGPY_BUILD_JOBS     parallel cythonize and compile jobs (default 2)
  JGPY_DEBUG=1        -O0 -g and line tracing
  JGPY_TARGET_ARCH    cross-compile for this Linux machine (e.g. aarch64; CC/LDSHARED name the cross compiler,
                      see scripts/build_wheel.py): the modules get the target's file suffix, the wheel its platform
"""

import importlib
import os
import platform
import sys
import sysconfig
import types
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
CORE = ROOT / "jgpy" / "_core"


JOBS = int(os.environ.get("JGPY_BUILD_JOBS", "2"))
DEBUG = os.environ.get("JGPY_DEBUG") == "1"
TARGET_ARCH = os.environ.get("JGPY_TARGET_ARCH") or platform.machine()


def generate_dialect():
    """Write the Cython generated from the dialect spec (jgpy/_core/codegen.py: headers.pxd/.pyx/.pyi and
    _codecs212.pxi) before the extensions are listed and cythonized. jgpy cannot be imported before it is built,
    so the directory is loaded as a package of its own; files whose text is unchanged are left alone (nothing
    recompiles)."""
    pkg = types.ModuleType("_jgpy_codegen")
    pkg.__path__ = [str(CORE)]
    sys.modules.setdefault("_jgpy_codegen", pkg)
    importlib.import_module("_jgpy_codegen.codegen").generate(CORE)


generate_dialect()


def extensions():
    cflags = ["-O0", "-g"] if DEBUG else ["-O3"]
    cflags += ["-D_GNU_SOURCE", "-fno-strict-aliasing", "-Wno-unused-function"]
    return [Extension(f"jgpy._core.{pyx.stem}", [str(pyx.relative_to(ROOT))], extra_compile_args=cflags)
            for pyx in sorted(CORE.glob("*.pyx"))]


class BuildExt(build_ext):
    """``build_ext`` that cythonizes when it runs (an sdist does not touch the C files), compiles JGPY_BUILD_JOBS
    modules at a time and names them for JGPY_TARGET_ARCH."""

    def finalize_options(self):
        super().finalize_options()
        if not self.parallel:
            self.parallel = JOBS
        if self.inplace:
            # setuptools compiles in build_lib, then copies into the tree: `build_ext --inplace` and `pip install
            # -e` (whose build_lib would be a new temporary directory) share one, so either rebuilds only what
            # changed
            self.build_lib = str(ROOT / "build" / "inplace" / "lib")
            self.build_temp = str(ROOT / "build" / "inplace" / "temp")

    def run(self):
        from Cython.Build import cythonize

        directives = {
            "language_level": 3,
            "embedsignature": True,
            # bounds/wraparound checks are switched off per module, where every index is checked by hand
        }
        if DEBUG:
            directives["linetrace"] = True
        generated = {e.name: e for e in cythonize(self.extensions, compiler_directives=directives, nthreads=JOBS,
                                                  quiet=True)}
        for ext in self.extensions:      # keep setuptools' own Extension objects: only their sources become C
            ext.sources = generated[ext.name].sources
        super().run()

    def get_ext_filename(self, ext_name):
        name = super().get_ext_filename(ext_name)
        host = platform.machine()
        if TARGET_ARCH != host:           # .cpython-311-x86_64-linux-gnu.so -> .cpython-311-aarch64-linux-gnu.so
            suffix = sysconfig.get_config_var("EXT_SUFFIX")
            if f"-{host}-" not in suffix:
                raise RuntimeError(f"cannot name modules for {TARGET_ARCH}: the host suffix is {suffix}")
            name = name[: -len(suffix)] + suffix.replace(f"-{host}-", f"-{TARGET_ARCH}-")
        return name


def version():
    for line in (ROOT / "jgpy" / "__init__.py").read_text().splitlines():
        if line.startswith("__version__"):
            return line.split("=", 1)[1].strip().strip('"')
    raise RuntimeError("no __version__ in jgpy/__init__.py")


setup(
    name="jgpy",
    version=version(),
    description="A JGroups 2.12.2-compatible group communication stack for Python, with a Cython core",
    long_description=(ROOT / "README.md").read_text() if (ROOT / "README.md").exists() else "",
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["jgpy", "jgpy.*"]),
    package_data={"jgpy._core": ["*.pxd", "*.pyx", "*.pyi"], "jgpy": ["py.typed", "conf/*.xml"]},
    ext_modules=extensions(),
    # a channel needs nothing beyond the standard library; delivery journals need NumPy and pyarrow, the checker
    # (python -m jgpy check) PySpark as well
    install_requires=[],
    extras_require={
        "journal": ["numpy", "pyarrow"],
        "security": ["cryptography", "pyjks"],
        "jms": ["stomp.py>=8"],
        "analysis": ["numpy", "pyarrow", "pyspark", "pandas<3", "matplotlib"],
    },
    entry_points={"console_scripts": ["jgpy=jgpy.__main__:main"]},
    cmdclass={"build_ext": BuildExt},
    options={"bdist_wheel": {"plat_name": f"linux_{TARGET_ARCH}"}} if TARGET_ARCH != platform.machine() else {},
    zip_safe=False,
)
