import sys

from osguard.cli.app import main

sys.exit(main())
