import sys

from gamut_hf.cli import main

sys.exit(main())
