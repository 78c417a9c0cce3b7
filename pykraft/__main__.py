import sys

from pykraft.cli import main

sys.exit(main())
