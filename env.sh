# Source this from the project root (". ./env.sh") before typing dagster commands by hand.
# It activates the virtualenv, keeps Dagster's state in a project-local, gitignored home with
# telemetry off (so CLI runs appear in the UI's history), and tells `dagster asset materialize`
# which module holds the definitions, so `dagster asset materialize --select X` works as typed.
DEDUP_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)"
. "$DEDUP_ROOT/.venv/bin/activate"
export DAGSTER_HOME="$DEDUP_ROOT/.dagster_home"
export DAGSTER_CLI_ASSET_MATERIALIZE_MODULE_NAME=dedup_assets.definitions
mkdir -p "$DAGSTER_HOME"
[ -f "$DAGSTER_HOME/dagster.yaml" ] || printf 'telemetry:\n  enabled: false\n' > "$DAGSTER_HOME/dagster.yaml"
