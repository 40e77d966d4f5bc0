#!/usr/bin/env bash
# A real single-node Kubernetes cluster on this machine, for the e2e suite (test/node) and
# `make demo-node`:
#
#   hack/node.sh up               start it; prints `export KUBECONFIG=<path>` on stdout once the node
#                                 is Ready and CoreDNS answers (progress, with elapsed time, on stderr)
#   hack/node.sh load TARBALL...  import image tarballs (docker-archive, `make images`) into the node
#   hack/node.sh down             stop everything `up` started (by PID), remove what it created, and
#                                 exit 0; whatever could not be removed is named on stderr, one line
#                                 each (`up` refuses to start while any of it is there)
#   hack/node.sh check            exit 0 if this machine can run the node, else say why and exit 2
#   hack/node.sh logs [N]         the last N lines (default 60) of every component's log
#   hack/node.sh status           what is running (exit 0 whether or not a node is up)
#
# What runs: etcd, kube-apiserver (hack/kube-bins.sh), kube-controller-manager, kube-scheduler,
# kubelet, kube-proxy (iptables mode) and CoreDNS (hack/node-bins.sh), Debian's containerd, runc,
# CNI plugins and iptables (installed when missing). Isolation:
#   - every component runs in the network namespace $NETNS (`ip netns list`): the node's address
#     10.250.0.2 on a veth pair inside it, the pod bridge cni0 (10.244.0.0/24), the Service CIDR
#     10.96.0.0/24 and kube-proxy's rules, CoreDNS on the node address; nothing is added to the
#     host's interfaces and nothing of the cluster listens outside it, except
#   - the API server, reachable from the host on 127.0.0.1:<ephemeral port> through a forwarder
#     (hack/nodehelper), which is what the printed kubeconfig names;
#   - every process `up` starts, and every pod, lives under the cgroup /retrycap-node (components
#     in /retrycap-node/system, pods under the kubelet's cgroupRoot /retrycap-node);
#   - state under /var/lib/retrycap-node and /run/retrycap-node, all of it removed by `down`.
# Components are detached (setsid, stdin from /dev/null, output to log files) and their PIDs are
# recorded in /run/retrycap-node/pids.
#
# Environment:
#   RETRYCAP_CACHE       cache root for the built binaries (see hack/kube-bins.sh)
#   RETRYCAP_NODE_WAIT   seconds `up` waits for each component (default 180)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NETNS=retrycap-node
NODE_NAME=retrycap-node
STATE=/var/lib/retrycap-node
RUN=/run/retrycap-node
CGROUP=retrycap-node
NODE_IP=10.250.0.2
POD_CIDR=10.244.0.0/24
SERVICE_CIDR=10.96.0.0/24
API_SERVICE_IP=10.96.0.1
DNS_IP=$NODE_IP
PAUSE_IMAGE=retrycap/node-pause:v0.1.0
WAIT=${RETRYCAP_NODE_WAIT:-180}
# Seconds `down` gives the components between SIGTERM and SIGKILL.
DOWN_GRACE=5
# Start order; `down` stops them in reverse.
# Host directories that components create whatever they are told (removed by `down` only if `up`
# created them, and then only when empty).
HOST_PATHS="/run/containerd/s /run/containerd /var/lib/cni/results /var/lib/cni /var/log/containers /var/log/pods"
COMPONENTS=(etcd kube-apiserver forwarder containerd kube-controller-manager kube-scheduler kubelet kube-proxy coredns)

T0=$SECONDS
log() { printf '[node %3ds] %s\n' "$((SECONDS - T0))" "$*" >&2; }
die() {
  log "FAILED: $*"
  exit 1
}

# ---------------------------------------------------------------------------------------------
# check: can this machine run the node at all? (Only here may the e2e suite skip.)

cant_run() {
  if [ "$(id -u)" != 0 ]; then echo "not root (the node needs root: network namespaces, cgroups, mounts)"; return; fi
  if [ "$(uname -s)" != Linux ]; then echo "not Linux"; return; fi
  if ! grep -qE '\scgroup2?\s' /proc/mounts; then echo "no cgroup filesystem mounted"; return; fi
  local probe
  for probe in /sys/fs/cgroup/memory /sys/fs/cgroup/unified /sys/fs/cgroup; do
    [ -d "$probe" ] || continue
    if mkdir "$probe/retrycap-node-probe.$$" 2>/dev/null; then rmdir "$probe/retrycap-node-probe.$$"; else echo "cgroups not writable ($probe)"; return; fi
    break
  done
  if ! command -v ip >/dev/null; then echo "no ip(8) (iproute2)"; return; fi
  if ! ip netns add "retrycap-probe-$$" 2>/dev/null; then echo "cannot create a network namespace"; return; fi
  ip netns delete "retrycap-probe-$$"
  if ! command -v apt-get >/dev/null && ! command -v containerd >/dev/null; then
    echo "containerd is not installed and there is no apt-get to install it"
    return
  fi
}

cmd_check() {
  local why
  why="$(cant_run)"
  if [ -n "$why" ]; then
    echo "this machine cannot run the test node: $why" >&2
    exit 2
  fi
}

# ---------------------------------------------------------------------------------------------
# helpers

in_ns() { nsenter --net="/run/netns/$NETNS" "$@"; }

# The cgroup hierarchies mounted here (cgroup v1 controllers, the unified v2 one, or v2 alone).
hierarchies() {
  local d t
  if [ "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ]; then
    echo /sys/fs/cgroup
    return
  fi
  for d in /sys/fs/cgroup/*/; do
    d=${d%/}
    [ -L "$d" ] && continue
    t="$(stat -f -c %T "$d" 2>/dev/null || true)"
    case "$t" in cgroupfs | cgroup2fs) echo "$d" ;; esac
  done
}

make_cgroups() {
  local h
  for h in $(hierarchies); do
    mkdir -p "$h/$CGROUP/system"
    if [ -f "$h/cpuset.cpus" ]; then
      # A v1 cpuset cgroup takes no task before its cpus and mems are set.
      local c
      for c in "$h/$CGROUP" "$h/$CGROUP/system"; do
        [ -s "$c/cpuset.cpus" ] || cat "$h/cpuset.cpus" >"$c/cpuset.cpus"
        [ -s "$c/cpuset.mems" ] || cat "$h/cpuset.mems" >"$c/cpuset.mems"
      done
    fi
  done
  if [ -f /sys/fs/cgroup/cgroup.subtree_control ]; then
    # cgroup v2 alone: the kubelet needs the controllers delegated to its root.
    local ctl
    for ctl in cpu memory pids io cpuset; do
      echo "+$ctl" >"/sys/fs/cgroup/$CGROUP/cgroup.subtree_control" 2>/dev/null || true
    done
  fi
}

# start NAME CMD...: starts CMD detached, in the node's network namespace and in the cgroup
# /retrycap-node/system, with output to $RUN/logs/NAME.log; records its PID.
start() {
  local name=$1
  shift
  local procs=()
  local h
  for h in $(hierarchies); do procs+=("$h/$CGROUP/system/cgroup.procs"); done
  # The inner shell puts itself in the cgroups, writes its PID and execs the component (nsenter
  # without --fork execs too), so the PID recorded is the component's.
  setsid bash -c '
    pidfile=$1 netns=$2; shift 2
    while [ "$1" != -- ]; do echo $$ >"$1"; shift; done; shift
    echo $$ >"$pidfile"
    exec nsenter --net="/run/netns/$netns" "$@"
  ' bash "$RUN/pids/$name" "$NETNS" "${procs[@]}" -- "$@" \
    </dev/null >>"$RUN/logs/$name.log" 2>&1 &
  local i
  for i in $(seq 1 50); do
    [ -s "$RUN/pids/$name" ] && break
    sleep 0.1
  done
  [ -s "$RUN/pids/$name" ] || die "$name did not start (see $RUN/logs/$name.log)"
}

# alive NAME: the component's recorded PID is a live process (a zombie waiting for its reaper
# counts as gone).
# Builtins only: `down` polls every component ten times a second, and three processes per
# call (cat, sed, cut) for nine components made its 10 s grace last 30 s on a loaded machine.
alive() {
  local pid st
  { read -r pid <"$RUN/pids/$1"; } 2>/dev/null || return 1
  [ -n "$pid" ] || return 1
  { read -r st <"/proc/$pid/stat"; } 2>/dev/null || return 1
  st=${st##*") "}
  st=${st%% *}
  [ -n "$st" ] && [ "$st" != Z ]
}

# wait_for WHAT COMPONENT CMD...: polls CMD every second until it succeeds, the component dies
# (fails at once with its log's tail) or $WAIT seconds pass.
wait_for() {
  local what=$1 comp=$2 start=$SECONDS
  shift 2
  until "$@" >/dev/null 2>&1; do
    if [ -n "$comp" ] && ! alive "$comp"; then
      tail -n 30 "$RUN/logs/$comp.log" >&2 || true
      die "$comp exited while waiting for $what (log: $RUN/logs/$comp.log)"
    fi
    if [ $((SECONDS - start)) -ge "$WAIT" ]; then
      [ -n "$comp" ] && { tail -n 30 "$RUN/logs/$comp.log" >&2 || true; }
      die "timed out after ${WAIT}s waiting for $what${comp:+ (log: $RUN/logs/$comp.log)}"
    fi
    sleep 1
  done
  log "$what ($((SECONDS - start))s)"
}

ensure_packages() {
  local need=()
  command -v containerd >/dev/null || need+=(containerd)
  command -v runc >/dev/null || need+=(runc)
  [ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
  command -v iptables >/dev/null || need+=(iptables)
  command -v openssl >/dev/null || need+=(openssl)
  command -v curl >/dev/null || need+=(curl)
  [ "${#need[@]}" -eq 0 ] && return
  log "installing ${need[*]} (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y --no-install-recommends "${need[@]}" >&2; then
    apt-get update >&2
    apt-get install -y --no-install-recommends "${need[@]}" >&2
  fi
  # Debian's package starts a containerd service where systemd runs; the node runs its own.
}

kubeconfig() { # kubeconfig FILE SERVER TOKEN
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: retrycap-node
  cluster:
    server: $2
    certificate-authority: $RUN/pki/ca.crt
users:
- name: user
  user:
    token: $3
contexts:
- name: retrycap-node
  context: {cluster: retrycap-node, user: user}
current-context: retrycap-node
EOF
}

# ---------------------------------------------------------------------------------------------
# up

cmd_up() {
  local why
  why="$(cant_run)"
  [ -z "$why" ] || die "this machine cannot run the test node: $why"
  local here
  here="$(leftovers)"
  if [ -n "$here" ]; then
    die "a node (or what is left of one) is already here: run hack/node.sh down first; found: $(echo "$here" | paste -sd';')"
  fi
  ensure_packages
  local kb nb
  log "control-plane binaries (hack/kube-bins.sh)"
  kb="$(bash "$ROOT/hack/kube-bins.sh")"
  log "node binaries (hack/node-bins.sh)"
  nb="$(bash "$ROOT/hack/node-bins.sh")"
  mkdir -p "$RUN"/{pids,logs,pki,bin} "$STATE"/{etcd,containerd,kubelet,cni/net.d,cni/ipam,pod-logs}
  # Host paths some components write to whatever their configuration says (containerd 1.6's shim
  # sockets, libcni's result cache, the kubelet's /var/log/containers links): what is there before
  # the node starts is kept by `down`.
  for d in $HOST_PATHS; do [ -e "$d" ] && echo "$d"; done >"$RUN/host-paths-before"
  ls -1 /run/containerd/s 2>/dev/null | sed 's#^#/run/containerd/s/#' >"$RUN/shim-sockets-before" || true
  log "building the forwarder and the pause image"
  (cd "$ROOT" && CGO_ENABLED=0 go build -o "$RUN/bin/nodehelper" ./hack/nodehelper)
  (cd "$ROOT/hack/images" && CGO_ENABLED=0 go build -trimpath -o "$RUN/bin/pause" ./pause &&
    go run . -ref "$PAUSE_IMAGE" -out "$RUN/pause.tar" "$RUN/bin/pause=/pause")

  log "certificates and tokens"
  local pki=$RUN/pki
  openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj /CN=retrycap-node-ca \
    -keyout "$pki/ca.key" -out "$pki/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj /CN=kube-apiserver -keyout "$pki/apiserver.key" \
    -out "$pki/apiserver.csr" 2>/dev/null
  printf 'subjectAltName=IP:%s,IP:%s,IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\nextendedKeyUsage=serverAuth\n' \
    "$NODE_IP" "$API_SERVICE_IP" >"$pki/apiserver.ext"
  openssl x509 -req -in "$pki/apiserver.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 30 -extfile "$pki/apiserver.ext" -out "$pki/apiserver.crt" 2>/dev/null
  openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
  # Static tokens, one identity per component: the Node authorizer and the default RBAC bindings
  # (system:kube-controller-manager, system:kube-scheduler, system:node-proxier) apply as on a
  # kubeadm cluster. CoreDNS reads as an administrator (it is part of the harness, not a pod).
  local t_admin t_node t_kcm t_sched t_proxy
  t_admin=$(openssl rand -hex 16) t_node=$(openssl rand -hex 16) t_kcm=$(openssl rand -hex 16)
  t_sched=$(openssl rand -hex 16) t_proxy=$(openssl rand -hex 16)
  cat >"$pki/tokens.csv" <<EOF
$t_admin,admin,admin,"system:masters"
$t_node,system:node:$NODE_NAME,node,"system:nodes"
$t_kcm,system:kube-controller-manager,kcm
$t_sched,system:kube-scheduler,sched
$t_proxy,system:kube-proxy,proxy
EOF
  chmod 600 "$pki"/*.key "$pki/tokens.csv"
  local inner="https://$NODE_IP:6443"
  kubeconfig "$RUN/admin-inner.kubeconfig" "$inner" "$t_admin"
  kubeconfig "$RUN/kubelet.kubeconfig" "$inner" "$t_node"
  kubeconfig "$RUN/kcm.kubeconfig" "$inner" "$t_kcm"
  kubeconfig "$RUN/scheduler.kubeconfig" "$inner" "$t_sched"
  kubeconfig "$RUN/proxy.kubeconfig" "$inner" "$t_proxy"

  log "network namespace $NETNS (node address $NODE_IP on a veth pair inside it)"
  ip netns add "$NETNS"
  in_ns ip link set lo up
  # The node's address on a veth pair whose both ends stay in the namespace (this kind of machine
  # has no dummy device driver): a real, non-loopback interface that leads nowhere.
  in_ns ip link add node0 type veth peer name node0-peer
  in_ns ip addr add "$NODE_IP/24" dev node0
  in_ns ip link set node0-peer up
  in_ns ip link set node0 up
  # Anything not for the node or a pod fails at once: nothing leaves the namespace.
  in_ns ip route add unreachable default
  # Service addresses need a route for the first routing decision of locally made connections
  # (the API server calling a webhook's Service); kube-proxy's OUTPUT rules then rewrite them.
  in_ns ip route add "$SERVICE_CIDR" dev node0
  in_ns sysctl -qw net.ipv4.ip_forward=1
  # Pod-to-Service traffic whose reply crosses the bridge must pass through conntrack.
  modprobe br_netfilter 2>/dev/null || true
  in_ns sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null ||
    log "warning: net.bridge.bridge-nf-call-iptables is not available in the namespace"
  make_cgroups

  log "etcd"
  start etcd "$kb/etcd" --name node --data-dir "$STATE/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster node=http://127.0.0.1:2380 --unsafe-no-fsync --quota-backend-bytes=2147483648
  log "kube-apiserver"
  start kube-apiserver "$kb/kube-apiserver" --etcd-servers=http://127.0.0.1:2379 \
    --advertise-address="$NODE_IP" --secure-port=6443 --cert-dir="$RUN/pki" \
    --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
    --client-ca-file="$pki/ca.crt" --token-auth-file="$pki/tokens.csv" \
    --authorization-mode=Node,RBAC --service-cluster-ip-range="$SERVICE_CIDR" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
    --kubelet-preferred-address-types=InternalIP,Hostname --allow-privileged=true \
    --enable-priority-and-fairness=false --profiling=false
  wait_for "API server ready" kube-apiserver in_ns curl -fsk --max-time 3 \
    -H "Authorization: Bearer $t_admin" "$inner/readyz"

  log "API server forwarder (host loopback -> $NODE_IP:6443)"
  # The forwarder's listener must live in the host's namespace: it is the one process `start`
  # does not put in the node's namespace (it enters it for its dials only).
  local procs=() h
  for h in $(hierarchies); do procs+=("$h/$CGROUP/system/cgroup.procs"); done
  setsid bash -c '
    pidfile=$1; shift
    while [ "$1" != -- ]; do echo $$ >"$1"; shift; done; shift
    echo $$ >"$pidfile"
    exec "$@"
  ' bash "$RUN/pids/forwarder" "${procs[@]}" -- "$RUN/bin/nodehelper" forward "$NETNS" "$NODE_IP:6443" "$RUN/apiserver.port" \
    </dev/null >>"$RUN/logs/forwarder.log" 2>&1 &
  local i
  for i in $(seq 1 50); do
    [ -s "$RUN/pids/forwarder" ] && break
    sleep 0.1
  done
  wait_for "forwarder listening" forwarder test -s "$RUN/apiserver.port"
  local port
  port="$(cat "$RUN/apiserver.port")"
  kubeconfig "$RUN/kubeconfig" "https://127.0.0.1:$port" "$t_admin"
  local kubectl="$kb/kubectl --kubeconfig=$RUN/kubeconfig"
  wait_for "API server reachable from the host on 127.0.0.1:$port" forwarder $kubectl get --raw=/readyz

  log "containerd"
  cat >"$RUN/containerd.toml" <<EOF
version = 2
root = "$STATE/containerd"
state = "$RUN/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$RUN/containerd/containerd.sock"
[ttrpc]
  address = "$RUN/containerd/containerd.sock.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/$PAUSE_IMAGE"
  # CAP_SYS_RESOURCE may be missing from the bounding set (as on this kind of machine): without
  # this every sandbox fails with "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$RUN/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$STATE/cni/net.d"
[plugins."io.containerd.internal.v1.opt"]
  path = "$STATE/containerd/opt"
EOF
  cat >"$STATE/cni/net.d/10-retrycap-node.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "retrycap-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$POD_CIDR"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$STATE/cni/ipam"
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
  start containerd containerd --config "$RUN/containerd.toml"
  wait_for "containerd serving" containerd ctr --address "$RUN/containerd/containerd.sock" version
  cmd_load "$RUN/pause.tar"

  log "kube-controller-manager, kube-scheduler"
  start kube-controller-manager "$nb/kube-controller-manager" --kubeconfig="$RUN/kcm.kubeconfig" \
    --authentication-kubeconfig="$RUN/kcm.kubeconfig" --authorization-kubeconfig="$RUN/kcm.kubeconfig" \
    --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
    --use-service-account-credentials=true --leader-elect=false --bind-address=127.0.0.1 \
    --service-cluster-ip-range="$SERVICE_CIDR" --profiling=false
  start kube-scheduler "$nb/kube-scheduler" --kubeconfig="$RUN/scheduler.kubeconfig" \
    --authentication-kubeconfig="$RUN/scheduler.kubeconfig" --authorization-kubeconfig="$RUN/scheduler.kubeconfig" \
    --leader-elect=false --bind-address=127.0.0.1 --profiling=false

  log "kubelet"
  cat >"$RUN/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# Facts of this kind of machine (cgroup v1, no swap accounting, no CAP_SYS_RESOURCE): see
# DESIGN.md, "A real node in the test suite".
failCgroupV1: false
failSwapOn: false
cgroupDriver: cgroupfs
cgroupRoot: /$CGROUP
oomScoreAdj: 0
containerRuntimeEndpoint: unix://$RUN/containerd/containerd.sock
address: $NODE_IP
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
clusterDNS: [$DNS_IP]
clusterDomain: cluster.local
# No host resolver inside the namespace: pods get the cluster's DNS only.
resolvConf: ""
serializeImagePulls: false
imageGCHighThresholdPercent: 100
evictionHard: {memory.available: "50Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
shutdownGracePeriod: 0s
# Everything under the node's own directories (the defaults are the host's).
volumePluginDir: $STATE/kubelet/volume-plugins
podLogsDir: $STATE/pod-logs
EOF
  start kubelet "$nb/kubelet" --config="$RUN/kubelet.yaml" --kubeconfig="$RUN/kubelet.kubeconfig" \
    --root-dir="$STATE/kubelet" --cert-dir="$STATE/kubelet/pki" --node-ip="$NODE_IP" \
    --hostname-override="$NODE_NAME"

  log "kube-proxy (iptables)"
  cat >"$RUN/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: $RUN/proxy.kubeconfig}
hostnameOverride: $NODE_NAME
clusterCIDR: $POD_CIDR
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
# The namespace's conntrack table is the host's: kube-proxy must not resize it.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false}
EOF
  start kube-proxy "$nb/kube-proxy" --config="$RUN/kube-proxy.yaml"

  log "CoreDNS (on $DNS_IP:53 in the namespace)"
  cat >"$RUN/Corefile" <<EOF
.:53 {
    errors
    health 127.0.0.1:18080
    ready 127.0.0.1:18181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $RUN/admin-inner.kubeconfig retrycap-node
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 5
    loadbalance
}
EOF
  start coredns "$nb/coredns" -conf "$RUN/Corefile"

  wait_for "node $NODE_NAME Ready" kubelet bash -c \
    "[ \"\$($kubectl get node $NODE_NAME -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}')\" = True ]"
  wait_for "CoreDNS answers kubernetes.default.svc.cluster.local = $API_SERVICE_IP" coredns bash -c \
    "[ \"\$(nsenter --net=/run/netns/$NETNS $RUN/bin/nodehelper dns $DNS_IP:53 kubernetes.default.svc.cluster.local)\" = $API_SERVICE_IP ]"
  local c
  for c in "${COMPONENTS[@]}"; do alive "$c" || die "$c is not running (log: $RUN/logs/$c.log)"; done
  log "node up in $((SECONDS - T0))s"
  echo "export KUBECONFIG=$RUN/kubeconfig"
}

# ---------------------------------------------------------------------------------------------
# load

cmd_load() {
  [ "$#" -gt 0 ] || die "usage: hack/node.sh load TARBALL..."
  [ -S "$RUN/containerd/containerd.sock" ] || die "the node is not up (no $RUN/containerd/containerd.sock)"
  local f
  for f in "$@"; do
    [ -f "$f" ] || die "load: no such tarball: $f"
    ctr --address "$RUN/containerd/containerd.sock" -n k8s.io images import --no-unpack=false "$f" >&2 ||
      die "load: ctr images import $f failed"
    log "loaded $f"
  done
}

# ---------------------------------------------------------------------------------------------
# down

# Every process in the node's cgroups (components, shims, containers), from the pids hierarchy
# (or the first one there is).
cgroup_pids() {
  local h
  for h in $(hierarchies); do
    [ -d "$h/$CGROUP" ] || continue
    find "$h/$CGROUP" -name cgroup.procs -exec cat {} + 2>/dev/null
  done | sort -un
}

our_mounts() {
  # Field 5 of mountinfo is the mount point; deepest first.
  awk -v a="$STATE" -v b="$RUN" '{ if (index($5, a) == 1 || index($5, b) == 1) print $5 }' /proc/self/mountinfo |
    awk '{ print length($0) " " $0 }' | sort -rn | cut -d' ' -f2-
}

# cni_cache lists libcni's cached results (/var/lib/cni/results) of this node's sandboxes: one
# file per sandbox and network, the node's bridge network (retrycap-node-*) and containerd's own
# loopback network (cni-loopback-*). The kubelet removes them when it tears a sandbox down; `down`
# kills the sandboxes instead, so it removes them itself: those whose network namespace is under
# $RUN (netns_mounts_under_state_dir), never another runtime's.
cni_cache() {
  {
    ls -1d /var/lib/cni/results/retrycap-node-* 2>/dev/null || true
    grep -lF "\"sandbox\":\"$RUN/" /var/lib/cni/results/* 2>/dev/null || true
  } | sort -u
  return 0
}

# leftovers prints, one a line, what a node leaves until `down` removes it: processes in its
# cgroups or recorded PIDs still alive, mounts, the network namespace, cgroups, directories.
leftovers() {
  local pids c m h d
  pids="$(cgroup_pids)"
  [ -z "$pids" ] || echo "processes in cgroup /$CGROUP:" $pids
  for c in "${COMPONENTS[@]}"; do alive "$c" && echo "$c (pid $(cat "$RUN/pids/$c"))"; done
  while read -r m; do [ -n "$m" ] && echo "mount $m"; done < <(our_mounts)
  ip netns list | grep -qw "$NETNS" && echo "network namespace $NETNS"
  for h in $(hierarchies); do [ -d "$h/$CGROUP" ] && echo "cgroup $h/$CGROUP"; done
  for d in "$STATE" "$RUN"; do [ -e "$d" ] && echo "directory $d"; done
  while read -r d; do [ -n "$d" ] && echo "file $d"; done < <(cni_cache)
  return 0
}

cmd_down() {
  local left=() c pid i
  # 1. The components, by their recorded PIDs, in reverse start order: SIGTERM, then SIGKILL.
  for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do
    c=${COMPONENTS[$i]}
    pid="$(cat "$RUN/pids/$c" 2>/dev/null || true)"
    [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && log "stopping $c (pid $pid)"
  done
  # A short grace: everything the node stored is deleted next, so a graceful shutdown saves
  # nothing (kube-apiserver, whose etcd is stopped at the same time, never finishes one: it was
  # SIGKILLed after the grace in every run).
  for i in $(seq 1 "$((DOWN_GRACE * 10))"); do
    local any=
    for c in "${COMPONENTS[@]}"; do alive "$c" && any=1; done
    [ -z "$any" ] && break
    sleep 0.1
  done
  for c in "${COMPONENTS[@]}"; do
    if alive "$c"; then
      pid="$(cat "$RUN/pids/$c")"
      log "$c (pid $pid) still running after ${DOWN_GRACE}s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  # A SIGKILLed process is gone only once it has exited (a large heap takes a moment).
  for i in $(seq 1 100); do
    local any=
    for c in "${COMPONENTS[@]}"; do alive "$c" && any=1; done
    [ -z "$any" ] && break
    sleep 0.1
  done
  # 2. What they left running: containerd's shims and the pods' processes, every one in the
  # node's cgroups. A frozen cgroup would hold a SIGKILL: thaw first.
  for i in $(seq 1 50); do
    local pids
    pids="$(cgroup_pids)"
    [ -z "$pids" ] && break
    [ "$i" = 1 ] && log "killing $(echo "$pids" | wc -w) process(es) left in the node's cgroups"
    find /sys/fs/cgroup/freezer/"$CGROUP" -name freezer.state 2>/dev/null | while read -r f; do echo THAWED >"$f" 2>/dev/null || true; done
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    sleep 0.2
  done
  # 3. Mounts (containers' root filesystems, sandboxes' shm and network namespaces, pods'
  # volumes), deepest first.
  local m
  while read -r m; do
    [ -n "$m" ] || continue
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done < <(our_mounts)
  # 4. The network namespace: the pod bridge, kube-proxy's rules and every address go with it.
  if ip netns list | grep -qw "$NETNS"; then
    ip netns delete "$NETNS" 2>/dev/null || true
  fi
  # 5. The cgroups, deepest first.
  local h
  for h in $(hierarchies); do
    [ -d "$h/$CGROUP" ] && find "$h/$CGROUP" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  # 6. What components wrote outside the node's directories: containerd 1.6's shim sockets (new
  # ones only), libcni's cached results for the node's sandboxes (both networks: before, the
  # loopback network's were left, one file per pod running at `down`), the kubelet's log links.
  if [ -f "$RUN/shim-sockets-before" ]; then
    local s
    for s in /run/containerd/s/*; do
      [ -S "$s" ] || continue
      grep -qxF "$s" "$RUN/shim-sockets-before" || rm -f "$s"
    done
  fi
  local f
  while read -r f; do [ -n "$f" ] && rm -f "$f"; done < <(cni_cache)
  find /var/log/containers -maxdepth 1 -lname "$STATE/*" -delete 2>/dev/null || true
  if [ -f "$RUN/host-paths-before" ]; then
    for d in $HOST_PATHS; do
      grep -qxF "$d" "$RUN/host-paths-before" || rmdir "$d" 2>/dev/null || true
    done
  fi
  # 7. The state; --one-file-system: never into a mount that could not be removed.
  [ -n "$(our_mounts)" ] || rm -rf --one-file-system "$STATE" "$RUN" 2>/dev/null || true

  # What is left, said once each.
  mapfile -t left < <(leftovers)
  # Exit 0 either way (the issue's contract: `down` is what a user runs to clean up, also after a
  # crash, and a cleanup step that fails its caller for a zombie shim or a busy mount hides the
  # run's own result); what is left is said, and `up` refuses to start over it.
  if [ "${#left[@]}" -gt 0 ]; then
    log "down: could not remove ${#left[@]} thing(s); remove them by hand (or reboot) before the next up:"
    for m in "${left[@]}"; do log "  could not remove: $m"; done
    return 0
  fi
  log "down: nothing left"
}

cmd_logs() {
  local n=${1:-60} f
  for f in "$RUN"/logs/*.log; do
    [ -f "$f" ] || continue
    echo "===== $f (last $n lines)"
    tail -n "$n" "$f"
  done
}

cmd_status() {
  local c
  for c in "${COMPONENTS[@]}"; do
    if alive "$c"; then echo "$c running (pid $(cat "$RUN/pids/$c"))"; else echo "$c not running"; fi
  done
  # Exit 0 either way (before: 1 and no word when no node was up, from the test below).
  if [ -f "$RUN/kubeconfig" ]; then
    echo "export KUBECONFIG=$RUN/kubeconfig"
  else
    echo "no node is up (no $RUN/kubeconfig): hack/node.sh up starts one"
  fi
}

case "${1:-}" in
up) cmd_up ;;
load)
  shift
  cmd_load "$@"
  ;;
down) cmd_down ;;
check) cmd_check ;;
logs)
  shift
  cmd_logs "$@"
  ;;
status) cmd_status ;;
*)
  echo "usage: hack/node.sh up | load TARBALL... | down | check | logs [N] | status" >&2
  exit 2
  ;;
esac
