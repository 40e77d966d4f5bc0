# Sourced by hack/helm-bin.sh and hack/prometheus-bin.sh: builds a Go program pinned in a module
# under hack/ into a cache outside the repo, once (no binary can be downloaded here, so it is built
# from the Go module proxy); a second run finds it and returns at once.
#
# go_bin NAME VERSION MODULE FIRST PACKAGE [go build flag...]
#   NAME     the binary, its module's directory hack/NAME and its cache directory NAME-VERSION
#   VERSION  the version hack/NAME/go.mod must require of MODULE (the script's NAME_VERSION)
#   FIRST    how long the first build takes, for the progress line ("a few minutes")
#   PACKAGE  the main package to build; the flags come before -trimpath
# Prints the binary's path on stdout (progress goes to stderr).
#
# Environment:
#   RETRYCAP_CACHE  cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/retrycap)
go_bin() {
  local name=$1 version=$2 module=$3 first=$4 pkg=$5
  shift 5
  local root cache bin start
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  cache="${RETRYCAP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/retrycap}"
  bin="$cache/$name-$version"
  mkdir -p "$bin"

  # The version the module pins and the cache directory's name must agree.
  if ! grep -qE "^\s*(require\s+)?$module v$version( |\$)" "$root/hack/$name/go.mod"; then
    echo "[$name-bin] hack/$name/go.mod does not require $module v$version; update ${name^^}_VERSION" >&2
    exit 1
  fi

  # One build at a time per version: parallel test binaries ask at once. The lock is held until
  # the calling script exits.
  exec 9>"$bin/.lock"
  flock 9

  if [ ! -x "$bin/$name" ] || [ ! -s "$bin/$name" ]; then
    start=$(date +%s)
    echo "[$name-bin] building $name v$version from the Go module proxy (first run on this machine: $first)" >&2
    (cd "$root/hack/$name" && CGO_ENABLED=0 go build "$@" -trimpath -ldflags='-s -w' -o "$bin/$name.tmp" "$pkg")
    mv "$bin/$name.tmp" "$bin/$name"
    echo "[$name-bin] $name built in $(( $(date +%s) - start ))s" >&2
  fi

  echo "$bin/$name"
}
