"""pip install --no-build-isolation ./python

Builds the cbi extension with CMake from the repository above this folder
(CBI_WITH_PYTHON=ON), and packages it with python/cbi. Environment:
  CBI_WITH_CUDA=AUTO|ON|OFF   the CUDA backend (default AUTO: when nvcc is found)
  CBI_JOBS=N                  parallel compile jobs (default: all cores)
  CBI_BUILD_DIR=path          reuse a configured build folder (e.g. build) instead of a fresh one
"""
import os
import pathlib
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        reuse = os.environ.get("CBI_BUILD_DIR")
        if reuse:
            build = pathlib.Path(reuse).resolve()
            subprocess.check_call(["cmake", "-S", str(ROOT), "-B", str(build), "-DCBI_WITH_PYTHON=ON"])
        else:
            build = pathlib.Path(self.build_temp).resolve() / "cmake"
            subprocess.check_call([
                "cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_TESTING=OFF",
                "-DCBI_WITH_PYTHON=ON", f"-DPython3_EXECUTABLE={sys.executable}",
                "-DCBI_WITH_CUDA=" + os.environ.get("CBI_WITH_CUDA", "AUTO")])
        jobs = os.environ.get("CBI_JOBS", str(os.cpu_count() or 2))
        subprocess.check_call(["cmake", "--build", str(build), "--target", "cbi_python", "-j", jobs])
        built = sorted((build / "python" / "cbi").glob("_core*.so"))
        if not built:
            raise RuntimeError(f"no _core*.so under {build}/python/cbi")
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built[0], target)


setup(
    name="cbi",
    version="0.1.0",
    description="Image filters with OpenCV semantics on NumPy, CuPy and torch arrays (CPU and CUDA)",
    packages=["cbi"],
    package_data={"cbi": ["*.pyi", "py.typed"]},
    ext_modules=[CMakeExtension("cbi._core")],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
    zip_safe=False,
)
