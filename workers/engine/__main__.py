"""Deprecated: ``python -m workers.engine`` is ``python -m fedweb_engine`` now."""

import sys
import warnings

from fedweb_engine.__main__ import main

warnings.warn("python -m workers.engine is deprecated: use python -m fedweb_engine", DeprecationWarning, stacklevel=1)
sys.exit(main())
