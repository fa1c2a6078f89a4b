#!/usr/bin/env bash
# Installs llmgw roles on this host (design §3): the role's program into
# PREFIX/lib/llmgw with a PREFIX/bin/llmgw-<role> launcher, its systemd unit,
# and example config and environment files in /etc/llmgw that are never
# overwritten. Running it again changes nothing that is already in place.
#
#   deploy/install.sh [--prefix /usr/local] [--root DIR] [--dist DIR] [--no-systemd] control|agent|gateway...
#
# --root DIR installs into DIR as if it were / (an image, a test): no user is
# created and systemctl is not run; the commands to run on the target are
# printed instead.
set -euo pipefail
umask 077

me=install.sh
die() {
  echo "$me: $*" >&2
  exit 1
}
say() { echo "$me: $*"; }

usage() {
  cat <<'EOF'
Usage: deploy/install.sh [--prefix DIR] [--root DIR] [--dist DIR] [--no-systemd] ROLE...

Installs the llmgw roles given (control, agent, gateway) from dist/:
dist/llmgw-ROLE (compiled, deno task compile) when present, else
dist/llmgw-ROLE.js (deno task bundle), run by deno from PATH.

Options:
  --prefix DIR   where lib/llmgw and bin go (default /usr/local)
  --root DIR     install into DIR as if it were /; runs no systemctl, creates no user
  --dist DIR     where the built programs are (default: dist/ of this checkout)
  --no-systemd   do not install the systemd units
EOF
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
dist=$repo/dist

prefix=/usr/local
root=
systemd=1
roles=()
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) [ $# -ge 2 ] || die "--prefix needs a directory"; prefix=$2; shift 2 ;;
    --prefix=*) prefix=${1#--prefix=}; shift ;;
    --root) [ $# -ge 2 ] || die "--root needs a directory"; root=$2; shift 2 ;;
    --root=*) root=${1#--root=}; shift ;;
    --dist) [ $# -ge 2 ] || die "--dist needs a directory"; dist=$2; shift 2 ;;
    --dist=*) dist=${1#--dist=}; shift ;;
    --no-systemd) systemd=0; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) die "unknown option \"$1\" (known: --prefix, --root, --dist, --no-systemd)" ;;
    *) roles+=("$1"); shift ;;
  esac
done

[ -f "$repo/scripts/roles.sh" ] || die "cannot find $repo/scripts/roles.sh (run from an llmgw checkout)"
# shellcheck source=../scripts/roles.sh
. "$repo/scripts/roles.sh"

[ ${#roles[@]} -gt 0 ] || die "no role given: name one or more of: $ROLES (--help for usage)"
case "$prefix" in
  *[!A-Za-z0-9._/-]*) die "--prefix \"$prefix\": only letters, digits and . _ / - are allowed" ;;
  /*) prefix=${prefix%/} ;;
  *) die "--prefix must be an absolute path, got \"$prefix\"" ;;
esac
[ -n "$prefix" ] || die "--prefix must not be /"
if [ -n "$root" ]; then
  [ -d "$root" ] || die "--root $root is not a directory"
  root=$(cd "$root" && pwd)
  [ "$root" != / ] || root=
fi

# Roles, checked and each once, in the order given.
wanted=()
for role in "${roles[@]}"; do
  case " $ROLES " in
    *" $role "*) ;;
    *) die "unknown role \"$role\" (known: $ROLES)" ;;
  esac
  case " ${wanted[*]-} " in
    *" $role "*) ;;
    *) wanted+=("$role") ;;
  esac
done

[ -d "$dist" ] || die "$dist is not a directory: build the programs with 'deno task bundle', or pass --dist DIR"
deno_path=$(command -v deno 2>/dev/null || true)

# What each role installs from, decided before anything is written.
declare -A kind
for role in "${wanted[@]}"; do
  if [ -f "$dist/llmgw-$role" ] && [ -x "$dist/llmgw-$role" ]; then
    kind[$role]=binary
  elif [ -f "$dist/llmgw-$role.js" ]; then
    [ -n "$deno_path" ] || die "deno not found on PATH, and there is no compiled $dist/llmgw-$role: install Deno 2, or build the binary with 'deno task compile'"
    case "$deno_path" in
      *[!A-Za-z0-9._/-]*) die "deno at \"$deno_path\": a launcher cannot carry that path; put deno in a plain directory such as /usr/local/bin" ;;
    esac
    kind[$role]=bundle
    perms=$(perms_for "$role")
    case "$perms" in
      *[!A-Za-z0-9=,._/\ -]*) die "scripts/roles.sh: permissions of $role contain characters a launcher cannot carry: $perms" ;;
    esac
  else
    die "neither $dist/llmgw-$role nor $dist/llmgw-$role.js exists: run 'deno task bundle' (or 'deno task compile') first"
  fi
done

lib=$root$prefix/lib/llmgw
bin=$root$prefix/bin
etc=$root/etc/llmgw
units=$root/etc/systemd/system

# Every directory written must be writable (or creatable) before the first write.
writable() {
  local d=$1
  while [ ! -e "$d" ]; do d=$(dirname "$d"); done
  [ -d "$d" ] && [ -w "$d" ]
}
targets=("$lib" "$bin" "$etc")
[ $systemd = 0 ] || targets+=("$units")
for d in "${targets[@]}"; do
  writable "$d" || die "cannot write $d: run as root, or pass --root DIR (and --prefix DIR)"
done

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# put MODE DEST < content: writes DEST only when its content or mode differ
# (returning 1 when they do not), through a temporary file beside it and a
# rename, so a running program is never overwritten in place. Nothing is
# created in DEST's directory when nothing changes.
put() {
  local mode=$1 dest=$2 tmp
  cat >"$scratch/content"
  if [ -f "$dest" ] && cmp -s "$scratch/content" "$dest" && [ "$(stat -c %a "$dest")" = "${mode#0}" ]; then
    say "unchanged $dest"
    return 1
  fi
  tmp=$(mktemp "$(dirname "$dest")/.llmgw-install.XXXXXX")
  cp "$scratch/content" "$tmp"
  chmod "$mode" "$tmp"
  mv -f "$tmp" "$dest"
  say "installed $dest"
}

# keep MODE SRC DEST: copies SRC to DEST only when DEST does not exist (an
# operator's file is never overwritten).
keep() {
  local mode=$1 src=$2 dest=$3
  if [ -e "$dest" ]; then
    say "kept $dest (exists)"
    return 0
  fi
  put "$mode" "$dest" <"$src" || true
}

# mkdir_mode MODE DIR: creates DIR (and parents) with MODE; an existing one is left as it is.
mkdir_mode() {
  [ -d "$2" ] && return 0
  # Parents get the usual 0755, not this script's umask.
  (umask 022 && mkdir -p "$2")
  chmod "$1" "$2"
  say "created $2/"
}

mkdir_mode 0755 "$lib"
mkdir_mode 0755 "$bin"
mkdir_mode 0755 "$etc"
[ $systemd = 0 ] || mkdir_mode 0755 "$units"

units_changed=0
for role in "${wanted[@]}"; do
  if [ "${kind[$role]}" = binary ]; then
    put 0755 "$lib/llmgw-$role" <"$dist/llmgw-$role" || true
    stale=$lib/llmgw-$role.js
    launcher="exec \"\$lib/llmgw-$role\" \"\$@\""
    from="the compiled binary"
  else
    put 0644 "$lib/llmgw-$role.js" <"$dist/llmgw-$role.js" || true
    stale=$lib/llmgw-$role
    # The same runtime flags the compiled binary is built with (scripts/compile.sh);
    # --no-config so that a deno.json in the caller's directory changes nothing.
    launcher="deno=\$(command -v deno 2>/dev/null) || deno=$deno_path
if [ ! -x \"\$deno\" ]; then
  echo \"llmgw-$role: deno not found on PATH nor at $deno_path: install Deno 2, or a compiled llmgw-$role\" >&2
  exit 127
fi
exec \"\$deno\" run --no-prompt --no-config --unstable-no-legacy-abort $(perms_for "$role") \"\$lib/llmgw-$role.js\" \"\$@\""
    from="the bundle under the role's permissions (scripts/roles.sh)"
  fi
  if [ -e "$stale" ]; then
    rm -f "$stale"
    say "removed $stale (replaced by $from)"
  fi
  put 0755 "$bin/llmgw-$role" <<EOF || true
#!/bin/sh
# llmgw-$role, written by deploy/install.sh (a reinstall overwrites it).
# Runs $from, found beside this
# launcher in ../lib/llmgw ($prefix/lib/llmgw): a tree installed with --root
# also runs where it lies.
lib=\$(dirname "\$(dirname "\$(readlink -f "\$0")")")/lib/llmgw
$launcher
EOF

  if [ $systemd = 1 ]; then
    # The units name /usr/local/bin; another --prefix is written into ExecStart.
    if sed "s#^ExecStart=/usr/local/bin/#ExecStart=$prefix/bin/#" "$here/systemd/llmgw-$role.service" |
      put 0644 "$units/llmgw-$role.service"; then
      units_changed=1
    fi
  fi

  # The control plane's config is written by `llmgw-control init --config-out` (docs/deploy.md).
  if [ "$role" != control ]; then keep 0644 "$here/examples/$role.json" "$etc/$role.json"; fi
  keep 0600 "$here/examples/$role.env" "$etc/$role.env"
  if [ -e "$etc/$role.env" ] && [ "$(($(stat -c '0%a' "$etc/$role.env") & 077))" != 0 ]; then
    say "warning: $etc/$role.env is readable by others (mode $(stat -c %a "$etc/$role.env")); it holds secrets: chmod 0600 it"
  fi

  if [ "${kind[$role]}" = bundle ] && [ "$role" != agent ]; then
    case "$(readlink -f "$deno_path")" in
      /home/* | /root/*)
        say "warning: deno is under a home directory ($deno_path), which llmgw-$role.service hides (ProtectHome=yes): install deno under /usr/local/bin or /usr/bin"
        ;;
    esac
  fi
done

# The admin CLI (llmgw: main.ts) comes with the control role.
case " ${wanted[*]} " in
  *" control "*)
    if [ -f "$dist/llmgw.js" ]; then
      put 0644 "$lib/llmgw.js" <"$dist/llmgw.js" || true
      put 0755 "$bin/llmgw" <<EOF || true
#!/bin/sh
# llmgw, the admin CLI, written by deploy/install.sh (a reinstall overwrites it).
lib=\$(dirname "\$(dirname "\$(readlink -f "\$0")")")/lib/llmgw
deno=\$(command -v deno 2>/dev/null) || deno=$deno_path
exec "\$deno" run --no-prompt --no-config --unstable-no-legacy-abort --allow-net --allow-read --allow-env "\$lib/llmgw.js" "\$@"
EOF
    fi
    ;;
esac

# control and gateway run as the llmgw system user (see their units).
needs_user=0
for role in "${wanted[@]}"; do
  [ "$role" = agent ] || needs_user=1
done
next=()
if [ $needs_user = 1 ]; then
  if [ -n "$root" ] || [ "$(id -u)" != 0 ]; then
    next+=("useradd --system --user-group --home-dir /var/lib/llmgw --no-create-home --shell /usr/sbin/nologin llmgw  # unless it exists")
  elif getent passwd llmgw >/dev/null; then
    say "unchanged user llmgw"
  else
    command -v useradd >/dev/null || die "useradd not found: create the system user and group llmgw, then run this again"
    shell=/usr/sbin/nologin
    [ -x "$shell" ] || shell=/sbin/nologin
    if getent group llmgw >/dev/null; then group=(--gid llmgw); else group=(--user-group); fi
    useradd --system "${group[@]}" --home-dir /var/lib/llmgw --no-create-home --shell "$shell" llmgw ||
      die "useradd failed to create the system user llmgw"
    say "created system user llmgw"
  fi
fi

if [ $systemd = 1 ]; then
  if [ -z "$root" ] && [ "$(id -u)" = 0 ] && [ -d /run/systemd/system ]; then
    if [ $units_changed = 1 ]; then
      systemctl daemon-reload || die "systemctl daemon-reload failed"
      say "ran systemctl daemon-reload"
    fi
  else
    next+=("systemctl daemon-reload")
  fi
fi

say "done. Next:"
for cmd in "${next[@]+"${next[@]}"}"; do echo "  $cmd"; done
for role in "${wanted[@]}"; do
  if [ "$role" = control ]; then
    # No control.json is installed: init writes it, with the store, the CA and
    # the first admin token, in the directory the unit uses (StateDirectory=).
    echo "  $prefix/bin/llmgw-control init --store /var/lib/llmgw/control --tls-san \"\$(hostname -f)\" --config-out /etc/llmgw/control.json  # add a --tls-san for every name agents, gateways and the CLI use (docs/deploy.md)"
  fi
  echo "  edit /etc/llmgw/$role.json and /etc/llmgw/$role.env"
  [ $systemd = 0 ] || echo "  systemctl enable --now llmgw-$role.service"
done
