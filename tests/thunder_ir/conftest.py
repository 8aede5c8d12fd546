import sys
from pathlib import Path

# The OpInfo table is a package of this folder.
sys.path.insert(0, str(Path(__file__).parent))
