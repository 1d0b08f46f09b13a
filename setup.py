"""Build script: compiles the Cython core (jgpy/_core/*.pyx) with optimisation on."""

import os
import sys
from pathlib import Path

from setuptools import Extension, find_packages, setup

ROOT = Path(__file__).parent
CORE = ROOT / "jgpy" / "_core"


def extensions():
    from Cython.Build import cythonize

    debug = os.environ.get("JGPY_DEBUG") == "1"
    cflags = ["-O0", "-g"] if debug else ["-O3"]
    cflags += ["-D_GNU_SOURCE", "-fno-strict-aliasing", "-Wno-unused-function"]
    exts = [
        Extension(f"jgpy._core.{pyx.stem}", [str(pyx.relative_to(ROOT))], extra_compile_args=cflags)
        for pyx in sorted(CORE.glob("*.pyx"))
    ]
    directives = {
        "language_level": 3,
        "embedsignature": True,
        # bounds/wraparound checks are switched off per module, where every index is checked by hand
    }
    if debug:
        directives["linetrace"] = True
    return cythonize(exts, compiler_directives=directives, nthreads=int(os.environ.get("JGPY_BUILD_JOBS", "2")),
                     quiet=True)


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
    package_data={"jgpy._core": ["*.pxd", "*.pyx"], "jgpy": ["py.typed", "conf/*.xml"]},
    ext_modules=extensions(),
    install_requires=["psutil"],
    extras_require={"analysis": ["pyspark", "pyarrow", "pandas<3", "matplotlib"]},
    entry_points={"console_scripts": ["jgpy=jgpy.__main__:main"]},
    zip_safe=False,
)
