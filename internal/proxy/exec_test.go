package proxy_test

import "os/exec"

func runBin(args ...string) (string, error) {
	out, err := exec.Command(proxyBin, args...).CombinedOutput()
	return string(out), err
}
