# Per-role least-privilege permissions (design §3), shared by compile.sh and bundle.sh.
# agent: runs nvidia-smi and engines, reads sysfs, writes pid files and logs, talks HTTP, and
# reads /proc/<pid> to fingerprint its engines (design §9.2), which Deno grants only with
# --allow-all: the one role that cannot be narrowed.
# control: serves HTTP, keeps its store on disk, runs engine plugin executables (describe).
# gateway: serves and proxies HTTP, reads only its own environment variables and files (the
# cluster CA named by LLMGW_CA), runs no programs.
# tests/role_permissions_test.ts runs control and gateway under exactly these.
ROLES="agent control gateway"
perms_for() {
  case "$1" in
    agent) echo "--allow-all" ;;
    control) echo "--allow-read --allow-write --allow-net --allow-env --allow-run" ;;
    gateway) echo "--allow-net --allow-env=LLMGW_TOKEN,LLMGW_URL,LLMGW_DEBUG,LLMGW_CA --allow-read" ;;
  esac
}
