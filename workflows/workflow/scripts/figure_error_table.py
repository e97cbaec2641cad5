"""Rule figure_error_table: the validation's targets and noise floor as a table."""
import json
import sys

sys.stderr = sys.stdout = open(snakemake.log[0], "w", buffering=1)  # noqa: F821

from tierlab.analysis.cache_validation import error_table  # noqa: E402

error_table(json.loads(open(snakemake.input[0]).read()), snakemake.output[0])  # noqa: F821
