import sys

from schedlab.cli import main

sys.exit(main())
