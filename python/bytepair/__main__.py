import sys

from bytepair.cli import main

sys.exit(main())
