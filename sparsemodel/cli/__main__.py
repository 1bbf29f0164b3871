"""python -m sparsemodel.cli: the command line (:func:`sparsemodel.cli.main`)."""

from . import main

raise SystemExit(main())
