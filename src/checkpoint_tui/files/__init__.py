"""Files a user names: inputs (schedules, histories, `--input` values) read within bounds, and outputs
(reports, bundles, exports) written without following a link planted where they go. Everything here
fails as one UsageError line naming the file; nothing above this package opens a user's file itself."""

from checkpoint_tui.files.inputs import (
    HISTORY_LIMIT,
    MAX_DEPTH,
    SCHEDULE_LIMIT,
    check_json_value,
    read_input,
    read_json_file,
)
from checkpoint_tui.files.outputs import OutputDir, check_output_dir, check_output_path, write_output

__all__ = [
    "HISTORY_LIMIT",
    "MAX_DEPTH",
    "SCHEDULE_LIMIT",
    "OutputDir",
    "check_json_value",
    "check_output_dir",
    "check_output_path",
    "read_input",
    "read_json_file",
    "write_output",
]
