import sys

from hynea_pl.cli import main

sys.exit(main())
