//go:build images

package images

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// service is one of the four images and what it needs to become ready.
type service struct {
	name     string
	api      bool // an API listener besides the ops one
	database bool
}

var services = []service{
	{name: "queue-gateway", api: true},
	{name: "order-service", api: true, database: true},
	{name: "notification-service", api: true},
	{name: "admission-dispatcher"},
}

func imageOf(svc string) string { return "localhost/waitingroom/" + svc + ":dev" }

// The Kubernetes manifests' container security context (k8s/base, checked
// by deploy/manifests): a read-only root filesystem, no privilege
// escalation, every capability dropped. The user is not forced here: the
// image's own USER must be 65532, as compose runs it.
var securityFlags = []string{"--read-only", "--security-opt", "no-new-privileges", "--cap-drop", "ALL"}

const (
	nonroot = 65532
	// grace is the shortest grace period the services get before SIGKILL
	// (compose's stop_grace_period; Kubernetes gives 30 s).
	grace = 20 * time.Second
)

// started is what one start of an image showed.
type started struct {
	ready time.Duration // from `run` to /readyz answering 200
	stop  time.Duration // from SIGTERM to the exit
}

// runChecked starts image as svc with host networking against the local
// servers and checks it the way a cluster runs it: ready, uid/gid 65532,
// no capabilities, no new privileges, a read-only root; then SIGTERM and an
// exit 0 within the grace period. Every problem found is returned.
func runChecked(t *testing.T, image string, svc service, env map[string]string) (started, []error) {
	t.Helper()
	var res started
	var problems []error
	user, err := run(t, "image", "inspect", "--format", "{{.Config.User}}", image)
	if err != nil {
		return res, []error{err}
	}
	if u, _, _ := strings.Cut(user, ":"); u != strconv.Itoa(nonroot) {
		problems = append(problems, fmt.Errorf("image user %q, want %d:%d (the nonroot user)", user, nonroot, nonroot))
	}

	ops := testenv.FreePort(t)
	env = merged(env, map[string]string{"OPS_ADDR": fmt.Sprintf("127.0.0.1:%d", ops), "LOG_LEVEL": "debug"})
	var api int
	if svc.api {
		api = testenv.FreePort(t)
		env["HTTP_ADDR"] = fmt.Sprintf("127.0.0.1:%d", api)
	}
	flags := append([]string{"--network", "host"}, securityFlags...)
	for _, k := range slices.Sorted(maps.Keys(env)) {
		flags = append(flags, "-e", k+"="+env[k])
	}
	begin := time.Now()
	c, err := tryContainer(t, "wr-img-"+svc.name+"-"+suffix(t), flags, image)
	if err != nil {
		return res, append(problems, err)
	}
	urls := []string{fmt.Sprintf("http://127.0.0.1:%d/readyz", ops)}
	if svc.api {
		urls = append(urls, fmt.Sprintf("http://127.0.0.1:%d/readyz", api))
	}
	for _, u := range urls {
		if err := waitStatus(c, u, http.StatusOK, time.Minute); err != nil {
			return res, append(problems, err)
		}
	}
	res.ready = time.Since(begin)

	st, err := c.procStatus("Uid", "Gid", "CapEff", "CapPrm", "NoNewPrivs")
	if err != nil {
		return res, append(problems, err)
	}
	ids := strings.Repeat(strconv.Itoa(nonroot)+" ", 4)
	for _, k := range []string{"Uid", "Gid"} {
		if st[k]+" " != ids {
			problems = append(problems, fmt.Errorf("runs with %s %q (real, effective, saved, fs), want %d for each", k, st[k], nonroot))
		}
	}
	for _, k := range []string{"CapEff", "CapPrm"} {
		if st[k] != "0000000000000000" {
			problems = append(problems, fmt.Errorf("%s %s, want no capabilities", k, st[k]))
		}
	}
	if st["NoNewPrivs"] != "1" {
		problems = append(problems, fmt.Errorf("NoNewPrivs %q, want 1", st["NoNewPrivs"]))
	}
	if opts, err := c.rootMountOptions(); err != nil || !slices.Contains(strings.Split(opts, ","), "ro") {
		problems = append(problems, fmt.Errorf("root filesystem mounted %q (%v), want ro", opts, err))
	}

	took, code, err := c.stop(grace)
	res.stop = took
	switch {
	case err != nil:
		problems = append(problems, err)
	case code != 0 || took >= grace:
		problems = append(problems, fmt.Errorf("SIGTERM: exit code %d after %s, want 0 within %s", code, took.Round(time.Millisecond), grace))
	}
	return res, problems
}

// waitStatus polls url until it answers want; an error if the container
// stops running or within passes first.
func waitStatus(c *container, url string, want int, within time.Duration) error {
	client := http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(within)
	for {
		if res, err := client.Get(url); err == nil {
			_ = res.Body.Close()
			if res.StatusCode == want {
				return nil
			}
		}
		if running := c.inspect("{{.State.Running}}"); running != "true" {
			logs, _ := run(c.t, "logs", "--tail", "20", c.name)
			return fmt.Errorf("the container stopped before %s answered %d (exit %s): %s", url, want, c.inspect("{{.State.ExitCode}}"), logs)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer %d within %s", url, want, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// serviceEnv is what svc needs against the local servers, on an exchange
// and queue of its own (cleaned up afterwards).
func serviceEnv(t *testing.T, svc service, id string) map[string]string {
	t.Helper()
	amqp := testenv.AMQPURL(t)
	exchange := "images." + id
	t.Cleanup(func() {
		testenv.DeleteAMQPTopology(amqp, exchange, exchange+".order-failed", exchange+".order-failed.dlq", exchange+".queue-changes", exchange+".queue-changes.dlq")
	})
	env := map[string]string{
		"REDIS_URL": testenv.RedisURL(t), "AMQP_URL": amqp, "AMQP_EXCHANGE": exchange,
		"ORDER_FAILED_QUEUE": exchange + ".order-failed", "QUEUE_CHANGES_QUEUE": exchange + ".queue-changes", "AUTH_JWT_SECRET": "images-test-secret-of-at-least-32-bytes",
		"DISPATCH_QUEUES": id,
	}
	if svc.database {
		env["DATABASE_URL"] = testenv.PostgresURL(t)
	}
	return env
}

// TestImagesRunAsTheClusterRunsThem starts each service image as uid 65532
// with a read-only root, no new privileges and no capabilities, against
// the local servers: it must become ready and stop on SIGTERM with exit 0
// within the grace period.
func TestImagesRunAsTheClusterRunsThem(t *testing.T) {
	for _, svc := range services {
		t.Run(svc.name, func(t *testing.T) {
			requireImage(t, imageOf(svc.name))
			res, problems := runChecked(t, imageOf(svc.name), svc, serviceEnv(t, svc, testenv.ID(t)))
			for _, p := range problems {
				t.Error(p)
			}
			t.Logf("%s: ready %s after `%s run`, stopped %s after SIGTERM", imageOf(svc.name),
				res.ready.Round(time.Millisecond), engine(t), res.stop.Round(time.Millisecond))
		})
	}
}

// allowed is what a service image may hold besides /app: what the
// distroless static base (or deploy/images/runtime.Containerfile) brings,
// and what the engine itself adds to a container's filesystem.
var allowed = []string{
	"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/os-release", "/usr/lib/os-release",
	"/etc/ssl/certs/", "/usr/share/zoneinfo/", "/usr/share/doc/", "/var/lib/dpkg/status.d/",
	"/etc/hosts", "/etc/hostname", "/etc/resolv.conf", "/run/.containerenv", "/.dockerenv",
}

// shells are the interpreters an attacker would look for first.
var shells = []string{"/bin/sh", "/bin/bash", "/bin/dash", "/bin/ash", "/bin/busybox", "/usr/bin/sh", "/usr/bin/bash", "/usr/bin/env", "/usr/bin/perl", "/usr/bin/python3"}

// fileReport is what an image holds.
type fileReport struct {
	files, bytes int64
	app          int64
}

// checkFiles checks an image's file list: /app is there, executable and the
// only executable; no shell; nothing outside allowed.
func checkFiles(files []imageFile) (fileReport, []error) {
	var r fileReport
	var problems []error
	var app *imageFile
	var stray []string
	for i, f := range files {
		if f.mode.IsDir() {
			continue
		}
		r.files++
		r.bytes += f.size
		if slices.Contains(shells, f.path) {
			problems = append(problems, fmt.Errorf("%s: a shell in the image", f.path))
		}
		if f.path == "/app" {
			app = &files[i]
			r.app = f.size
			continue
		}
		if f.mode.IsRegular() && f.mode.Perm()&0o111 != 0 {
			problems = append(problems, fmt.Errorf("%s: an executable besides /app", f.path))
		}
		if !slices.ContainsFunc(allowed, func(a string) bool {
			return f.path == a || (strings.HasSuffix(a, "/") && strings.HasPrefix(f.path, a))
		}) {
			stray = append(stray, f.path)
		}
	}
	switch {
	case app == nil:
		problems = append(problems, errors.New("/app: missing (the ENTRYPOINT)"))
	case !app.mode.IsRegular() || app.mode.Perm()&0o111 == 0:
		problems = append(problems, fmt.Errorf("/app: mode %s, want an executable file", app.mode))
	case app.size < 1<<20:
		problems = append(problems, fmt.Errorf("/app: %d bytes, too small to be a service", app.size))
	}
	if len(stray) > 0 {
		sort.Strings(stray)
		problems = append(problems, fmt.Errorf("%d files the service does not need: %s", len(stray), strings.Join(first(stray, 10), ", ")))
	}
	return r, problems
}

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], "...")
	}
	return s
}

// TestImagesHoldOnlyTheBinary lists each image's files: the binary, CA
// certificates, tzdata and the user database, nothing else; no shell.
func TestImagesHoldOnlyTheBinary(t *testing.T) {
	for _, svc := range services {
		t.Run(svc.name, func(t *testing.T) {
			image := imageOf(svc.name)
			requireImage(t, image)
			files, err := imageFiles(t, image)
			if err != nil {
				t.Fatal(err)
			}
			r, problems := checkFiles(files)
			for _, p := range problems {
				t.Error(p)
			}
			size, err := strconv.ParseInt(must(t, "image", "inspect", "--format", "{{.Size}}", image), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			var listed []string
			zoneinfo := 0
			for _, f := range files {
				switch {
				case f.mode.IsDir():
				case strings.HasPrefix(f.path, "/usr/share/zoneinfo/"):
					zoneinfo++
				default:
					listed = append(listed, fmt.Sprintf("%s (%s, uid %d, %d bytes)", f.path, f.mode, f.uid, f.size))
				}
			}
			t.Logf("%s: %.1f MiB (%s image inspect); %d files, %.1f MiB, of which /app %.1f MiB:\n  %s\n  and %d under /usr/share/zoneinfo/",
				image, mib(size), engine(t), r.files, mib(r.bytes), mib(r.app), strings.Join(listed, "\n  "), zoneinfo)
		})
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func merged(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}

// buildVariant builds queue-gateway's image from a copy of deploy/Dockerfile
// changed by edit (old -> new, which must occur) with build.sh, as `make
// images` builds (same bases, same build arguments, so the builder stage
// comes from its cache), and returns its tag.
func buildVariant(t *testing.T, kind, old, new string) string {
	t.Helper()
	root := repoRoot(t)
	b, err := os.ReadFile(root + "/deploy/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("deploy/Dockerfile has no %q to break", old)
	}
	df := t.TempDir() + "/Dockerfile"
	if err := os.WriteFile(df, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(root + "/deploy/images/build.sh")
	cmd.Env = append(os.Environ(), "ENGINE="+engine(t), "DOCKERFILE="+df, "SERVICES=queue-gateway", "IMAGES_TAG=broken-"+kind)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build.sh: %v: %s", err, tail(string(out), 2000))
	}
	tag := "localhost/waitingroom/queue-gateway:broken-" + kind
	t.Cleanup(func() { _, _ = run(t, "rmi", "-f", tag) })
	return tag
}

// TestBrokenDockerfileFailsTheChecks: the checks above catch a Dockerfile
// that puts the binary where the ENTRYPOINT does not look, and one that
// runs as root.
func TestBrokenDockerfileFailsTheChecks(t *testing.T) {
	gw := services[0]
	cases := []struct {
		kind, old, new string
		want           []string // in the problems found, each (a|b: either)
	}{
		{"binary-path", "COPY --from=build /out/app /app", "COPY --from=build /out/app /usr/local/bin/app",
			[]string{"/app: missing", "/usr/local/bin/app: an executable besides /app", "the container does not start|the container stopped before"}},
		{"root-user", "USER 65532:65532", "USER 0:0",
			[]string{`image user "0:0"`, `runs with Uid "0 0 0 0"`}},
	}
	for _, c := range cases {
		t.Run(c.kind, func(t *testing.T) {
			image := buildVariant(t, c.kind, c.old, c.new)
			files, err := imageFiles(t, image)
			if err != nil {
				t.Fatal(err)
			}
			_, problems := checkFiles(files)
			_, started := runChecked(t, image, gw, serviceEnv(t, gw, testenv.ID(t)))
			problems = append(problems, started...)
			var text []string
			for _, p := range problems {
				text = append(text, p.Error())
			}
			all := strings.Join(text, "\n")
			for _, w := range c.want {
				if !slices.ContainsFunc(strings.Split(w, "|"), func(w string) bool { return strings.Contains(all, w) }) {
					t.Errorf("no problem saying %q; found:\n%s", w, all)
				}
			}
			t.Logf("%s: %d problems found:\n%s", c.kind, len(problems), all)
		})
	}
}
