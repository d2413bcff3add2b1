// How to install the server, said the same way everywhere the extension says it. sessiond
// is not published on PyPI (`pip install sessiond` finds nothing): it is installed from a
// checkout of its repository, or from a wheel built from one.
export const INSTALL_COMMAND = "pip install /path/to/sessiond";

export const INSTALL_HINT =
  "`pip install /path/to/sessiond` from a checkout of the sessiond repository, or `pip install sessiond-<version>-py3-none-any.whl` built from it (sessiond is not on PyPI)";

export const UPDATE_HINT =
  "Update it from the repository: `pip install /path/to/sessiond` (or a wheel built from it), then restart the server.";
