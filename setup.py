"""The compiled kernels of the lean path (sparsemodel/numerics/_lean.pyx), built at install by
``pip install -e .`` / ``pip install .`` (Cython and scipy's BLAS/LAPACK declarations come with the
build, pyproject.toml's build requires; a C compiler and the Python headers are needed).

The extension is optional: where it cannot be compiled (no C compiler, no Python headers) the
install still succeeds, setuptools prints why ("building extension ... failed"), and ``auto`` runs
the same pipeline in Python, saying so once with a RuntimeWarning (sparsemodel/lowering/lean.py,
``kernels``)."""

from setuptools import Extension, setup

try:
    from Cython.Build import cythonize
except ImportError:  # a build without the declared build requires (python setup.py ... by hand)
    print("sparsemodel: Cython is not installed, so the lean path's kernels are not built (auto runs in Python)")
    ext_modules = []
else:
    ext_modules = cythonize(
        [Extension("sparsemodel.numerics._lean", ["sparsemodel/numerics/_lean.pyx"])],
        compiler_directives={"language_level": "3"},
    )
    for ext in ext_modules:  # (cythonize's extensions drop the optional flag of those it was given)
        ext.optional = True

setup(ext_modules=ext_modules)
