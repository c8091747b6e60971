import sys

from syntaxformer.cli import main

sys.exit(main())
