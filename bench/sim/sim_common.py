"""What the bench/sim scripts check before they run: the full traces they
read and the built gpusched binary. Each check exits with one line saying
what is missing and where to get it, never a traceback.

The full traces are not in the repository (config/traces/ holds small cuts
for the documented commands); config/traces/SOURCE.md, "Full traces", names
the upstream repository and commit of every file.
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Where the scripts look by default: a `shared/traces/<trace>` folder next to
# the repository, as the traces' own SOURCE.md files lay them out.
DEFAULT_TRACES = os.path.join(os.path.dirname(ROOT), "shared", "traces")

TRACES = {
    "openb": "the full openb traces (openb_node_list_gpu_node.csv and the openb_pod_list_*.csv "
             "pod lists: hkust-adsl/kubernetes-scheduler-simulator, data/csv/)",
    "philly": "the full Philly trace (philly_jobs_pollux.csv: petuum/adaptdl, branch "
              "osdi21-artifact, simulator/traces/philly.csv) and the Helios VC sizes "
              "(helios_qssf_philly_vc_nodes.csv: S-Lab-System-Group/HeliosArtifact)",
}


def require_traces(trace, paths, flag="--traces-dir"):
    """Exits naming the missing files of `trace` (openb or philly) and where
    to get them, if any of `paths` is not a file."""
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        sys.exit(f"missing {', '.join(missing)}: this needs {TRACES[trace]}; "
                 f"config/traces/SOURCE.md (\"Full traces\") gives each file's repository and "
                 f"commit; put them in a folder and pass {flag} DIR")


def require_binary(build):
    """The gpusched binary of build directory `build`, or exits saying so."""
    binary = os.path.join(build, "gpusched")
    if not os.access(binary, os.X_OK):
        sys.exit(f"no gpusched binary in {build}: build it first "
                 f"(cmake --build {build} --target gpusched) or pass the build directory")
    return binary
