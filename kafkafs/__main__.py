import sys

from kafkafs.cli.main import main

sys.exit(main())
