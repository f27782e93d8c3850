package kubelet

import (
	"bufio"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// MachineInfo is what the node reports about its machine.
type MachineInfo struct {
	CPUs         int
	MemoryBytes  int64
	StorageBytes int64
	MachineID    string
	SystemUUID   string
	BootID       string
	Kernel       string
	OSImage      string
}

// maxPods is the node's pod capacity (the kubelet's --max-pods default).
const maxPods = 110

// Capacity is the node's capacity; allocatable is the same (no
// reservations): cpu, memory, ephemeral-storage, hugepages, pods=110.
func (m MachineInfo) Capacity() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(int64(m.CPUs), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(m.MemoryBytes, resource.BinarySI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(m.StorageBytes, resource.BinarySI),
		corev1.ResourcePods:             *resource.NewQuantity(maxPods, resource.DecimalSI),
		"hugepages-1Gi":                 *resource.NewQuantity(0, resource.DecimalSI),
		"hugepages-2Mi":                 *resource.NewQuantity(0, resource.DecimalSI),
	}
}

// Allocatable is what pods may use.
func (m MachineInfo) Allocatable() corev1.ResourceList { return m.Capacity() }

var machineOnce = sync.OnceValue(func() MachineInfo { return readMachine("/") })

func (k *Kubelet) machine() MachineInfo {
	if k.cfg.Machine != nil {
		return *k.cfg.Machine
	}
	m := machineOnce()
	var st unix.Statfs_t
	if unix.Statfs(k.cfg.DataDir, &st) == nil {
		m.StorageBytes = int64(st.Blocks) * st.Bsize
	}
	return m
}

func readMachine(root string) MachineInfo {
	m := MachineInfo{CPUs: runtime.NumCPU()}
	m.MemoryBytes = meminfo("MemTotal")
	m.MachineID = readTrim("/etc/machine-id")
	m.SystemUUID = readTrim("/sys/class/dmi/id/product_uuid")
	if m.SystemUUID == "" {
		m.SystemUUID = m.MachineID
	}
	m.BootID = readTrim("/proc/sys/kernel/random/boot_id")
	var uts unix.Utsname
	if unix.Uname(&uts) == nil {
		m.Kernel = unix.ByteSliceToString(uts.Release[:])
	}
	m.OSImage = "Linux"
	if f, err := os.Open("/etc/os-release"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "PRETTY_NAME="); ok {
				m.OSImage = strings.Trim(v, `"`)
			}
		}
		f.Close()
	}
	var st unix.Statfs_t
	if unix.Statfs(root, &st) == nil {
		m.StorageBytes = int64(st.Blocks) * st.Bsize
	}
	return m
}

// meminfo reads one /proc/meminfo field in bytes.
func meminfo(field string) int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 2 && fs[0] == field+":" {
			n, _ := strconv.ParseInt(fs[1], 10, 64)
			return n * 1024
		}
	}
	return 0
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// nodeIP is the configured address, else DetectNodeIP's.
func (k *Kubelet) nodeIP() string {
	if k.cfg.NodeIP != "" {
		return k.cfg.NodeIP
	}
	return DetectNodeIP()
}

// DetectNodeIP is the address a kubelet not told one reports as its
// node's InternalIP: the first IPv4 address of an interface that is up,
// neither loopback nor a pod bridge, veth or docker's; else 127.0.0.1.
func DetectNodeIP() string {
	ifaces, _ := net.Interfaces()
	for _, iface := range ifaces {
		if iface.Flags&net.FlagUp == 0 || iface.Flags&net.FlagLoopback != 0 {
			continue
		}
		if strings.HasPrefix(iface.Name, "cni") || strings.HasPrefix(iface.Name, "veth") || strings.HasPrefix(iface.Name, "docker") {
			continue
		}
		addrs, _ := iface.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				return ipn.IP.String()
			}
		}
	}
	return "127.0.0.1"
}
