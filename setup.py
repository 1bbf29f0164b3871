"""The compiled kernels of the lean path (sparsemodel/numerics/_lean.pyx), built at install by
``pip install -e .`` / ``pip install .`` (a C compiler and the Python headers are needed; everything
else is declared in pyproject.toml)."""

from Cython.Build import cythonize
from setuptools import Extension, setup

setup(
    ext_modules=cythonize(
        [Extension("sparsemodel.numerics._lean", ["sparsemodel/numerics/_lean.pyx"])],
        compiler_directives={"language_level": "3"},
    )
)
