"""sitecustomize for processes under libsm120shim.so: installs sm120shim_hook,
then runs the sitecustomize this one shadows, if the path has another.

The shim puts this directory at the front of PYTHONPATH (SM120SHIM_ADVERTISE
kernel, the default).  Nothing here may stop the interpreter: errors are
swallowed, and the hook does nothing unless the shim is preloaded.
"""
import os
import sys


def _install():
    try:
        import sm120shim_hook

        sm120shim_hook.install()
    except Exception:
        pass


def _chain():
    """Run the next sitecustomize on sys.path, as if this one were absent."""
    try:
        import importlib.machinery
        import importlib.util

        here = os.path.dirname(os.path.abspath(__file__))
        rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
        if spec is None or spec.loader is None:
            return
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception as error:
        sys.stderr.write("sm120shim: the sitecustomize after %s failed: %r\n"
                         % (os.path.dirname(os.path.abspath(__file__)), error))


_install()
_chain()
