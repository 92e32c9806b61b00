"""``python -m rlvr.cli``: the ``rlvr`` command without the installed script."""

import sys

from rlvr.cli.main import main

sys.exit(main())
