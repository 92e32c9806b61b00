import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED_REFERENCE = ROOT.parent / "shared" / "reference"
sys.path.insert(0, str(Path(__file__).resolve().parent))
