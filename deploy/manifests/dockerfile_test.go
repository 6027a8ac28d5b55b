package manifests

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	line int
	cmd  string // upper case
	args string
}

// stage is one FROM and what follows it.
type stage struct {
	from  string // image or stage reference, ARGs not yet expanded
	name  string // AS name, lower case
	instr []instruction
}

type dockerfile struct {
	globalArgs map[string]string // ARGs before the first FROM, with defaults
	stages     []stage
}

// parseDockerfile reads deploy/Dockerfile line by line: comments and blank
// lines dropped, backslash continuations joined, instructions split into
// stages at each FROM.
func parseDockerfile(t *testing.T) dockerfile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var ins []instruction
	var cur strings.Builder
	start := 0
	for i, raw := range strings.Split(string(b), "\n") {
		line := strings.TrimSpace(raw)
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if cur.Len() > 0 && strings.HasPrefix(line, "#") {
			continue // a comment inside a continuation
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if strings.HasSuffix(line, `\`) {
			cur.WriteString(strings.TrimSuffix(line, `\`) + " ")
			continue
		}
		cur.WriteString(line)
		text := cur.String()
		cur.Reset()
		cmd, args, _ := strings.Cut(text, " ")
		ins = append(ins, instruction{line: start, cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)})
	}
	if cur.Len() > 0 {
		t.Fatal("Dockerfile ends inside a continuation line")
	}
	df := dockerfile{globalArgs: map[string]string{}}
	for _, in := range ins {
		switch {
		case in.cmd == "FROM":
			f := strings.Fields(in.args)
			var from, name string
			for i := 0; i < len(f); i++ {
				switch {
				case strings.HasPrefix(f[i], "--"):
				case strings.EqualFold(f[i], "AS") && i+1 < len(f):
					name = strings.ToLower(f[i+1])
					i++
				default:
					from = f[i]
				}
			}
			df.stages = append(df.stages, stage{from: from, name: name})
		case len(df.stages) == 0:
			if in.cmd != "ARG" {
				t.Fatalf("line %d: %s before the first FROM", in.line, in.cmd)
			}
			k, v, _ := strings.Cut(in.args, "=")
			df.globalArgs[k] = v
		default:
			st := &df.stages[len(df.stages)-1]
			st.instr = append(st.instr, in)
		}
	}
	return df
}

var argRef = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?`)

// expand substitutes args in s, again while a substituted value holds a
// reference itself (ARG BUILDER_IMAGE=golang:${GO_VERSION}).
func expand(s string, args map[string]string) string {
	for range 8 {
		next := argRef.ReplaceAllStringFunc(s, func(m string) string {
			return args[argRef.FindStringSubmatch(m)[1]]
		})
		if next == s {
			break
		}
		s = next
	}
	return s
}

func (df dockerfile) stageNamed(name string) (int, bool) {
	for i, st := range df.stages {
		if st.name != "" && st.name == strings.ToLower(name) {
			return i, true
		}
	}
	return 0, false
}

// chain follows the final stage for one SERVICE value back to its base
// image: the stages, last first, and the image.
func (df dockerfile) chain(t *testing.T, svc string) ([]stage, string) {
	t.Helper()
	args := map[string]string{}
	for k, v := range df.globalArgs {
		args[k] = v
	}
	args["SERVICE"] = svc
	var out []stage
	i := len(df.stages) - 1
	for range len(df.stages) {
		st := df.stages[i]
		out = append(out, st)
		from := expand(st.from, args)
		j, ok := df.stageNamed(from)
		if !ok {
			return out, from
		}
		i = j
	}
	t.Fatalf("SERVICE=%s: FROM chain loops", svc)
	return nil, ""
}

func TestDockerfile(t *testing.T) {
	df := parseDockerfile(t)
	if len(df.stages) < 2 {
		t.Fatalf("%d stages: want a multi-stage build", len(df.stages))
	}
	if _, ok := df.globalArgs["SERVICE"]; !ok {
		t.Error("no global ARG SERVICE before the first FROM")
	}

	// The builder: golang 1.26, the workspace copied, a static build of the
	// service with the module and build caches mounted.
	var builder *stage
	for i := range df.stages {
		if strings.HasPrefix(expand(df.stages[i].from, df.globalArgs), "docker.io/library/golang:") {
			if builder != nil {
				t.Fatal("two golang stages")
			}
			builder = &df.stages[i]
		}
	}
	if builder == nil {
		t.Fatal("no golang builder stage")
	}
	// Fully qualified: podman resolves no short name by default.
	if img := strings.TrimPrefix(expand(builder.from, df.globalArgs), "docker.io/library/"); img != "golang:1.26" && !strings.HasPrefix(img, "golang:1.26.") && !strings.HasPrefix(img, "golang:1.26-") {
		t.Errorf("builder FROM %s, want docker.io/library/golang:1.26", img)
	}
	var argService, copiesWorkspace bool
	var build string
	for _, in := range builder.instr {
		switch in.cmd {
		case "ARG":
			if in.args == "SERVICE" || strings.HasPrefix(in.args, "SERVICE=") {
				argService = true
			}
		case "COPY":
			if f := strings.Fields(in.args); slices.Equal(f, []string{".", "."}) || slices.Contains(f, "go.work") {
				copiesWorkspace = true
			}
		case "RUN":
			if strings.Contains(in.args, "go build") {
				build = in.args
			}
		}
	}
	if !argService {
		t.Error("builder stage does not declare ARG SERVICE")
	}
	if !copiesWorkspace {
		t.Error("builder stage does not copy go.work (the workspace)")
	}
	for _, want := range []string{
		"CGO_ENABLED=0", "go build", "-trimpath", `-ldflags="-s -w"`, "-o /out/app",
		"--mount=type=cache,target=/go/pkg/mod", "--mount=type=cache,target=/root/.cache/go-build",
	} {
		if !strings.Contains(build, want) {
			t.Errorf("build RUN lacks %q: %s", want, build)
		}
	}
	if !regexp.MustCompile(`\./services/\$\{?SERVICE\}?(\s|$)`).MatchString(build) {
		t.Errorf("build RUN does not build ./services/$SERVICE: %s", build)
	}

	// Each SERVICE value: the final image is distroless static nonroot,
	// runs as a non-root user, starts /app, exposes the service's port.
	for _, s := range services {
		stages, image := df.chain(t, s.name)
		if image != "gcr.io/distroless/static-debian12:nonroot" && image != "scratch" {
			t.Errorf("SERVICE=%s: final image based on %q, want gcr.io/distroless/static-debian12:nonroot", s.name, image)
		}
		var user, entrypoint string
		var exposed []string
		var copiesApp bool
		for _, st := range stages { // last stage first: the first USER seen wins
			for k := len(st.instr) - 1; k >= 0; k-- {
				in := st.instr[k]
				switch in.cmd {
				case "USER":
					if user == "" {
						user = in.args
					}
				case "ENTRYPOINT":
					if entrypoint == "" {
						entrypoint = in.args
					}
				case "EXPOSE":
					exposed = append(exposed, strings.Fields(in.args)...)
				case "COPY":
					if f := strings.Fields(in.args); len(f) == 3 && f[0] == "--from="+builder.name && f[1] == "/out/app" && f[2] == "/app" {
						copiesApp = true
					}
				case "RUN":
					t.Errorf("SERVICE=%s: RUN in a runtime stage (line %d): there is no shell", s.name, in.line)
				}
			}
		}
		uid, _, _ := strings.Cut(user, ":")
		if n, err := strconv.Atoi(uid); (err != nil && uid != "nonroot") || (err == nil && n == 0) {
			t.Errorf("SERVICE=%s: USER %q, want a non-root user", s.name, user)
		}
		var ep []string
		if err := json.Unmarshal([]byte(entrypoint), &ep); err != nil || !slices.Equal(ep, []string{"/app"}) {
			t.Errorf("SERVICE=%s: ENTRYPOINT %s, want [\"/app\"] (exec form: there is no shell)", s.name, entrypoint)
		}
		var want []string
		if s.port != 0 {
			want = append(want, strconv.Itoa(s.port))
		}
		want = append(want, strconv.Itoa(s.opsPort))
		if !slices.Equal(exposed, want) {
			t.Errorf("SERVICE=%s: EXPOSE %v, want %v (the API port, if any, and the ops port)", s.name, exposed, want)
		}
		if !copiesApp {
			t.Errorf("SERVICE=%s: the final image does not copy /out/app from the builder", s.name)
		}
	}
}

// TestDockerignore evaluates the root .dockerignore as BuildKit does and
// checks that the build context holds what the workspace build needs and
// not the rest.
func TestDockerignore(t *testing.T) {
	root := repoRoot(t)
	f, err := os.Open(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	inContext := func(rel string) bool {
		excluded, err := pm.MatchesOrParentMatches(rel)
		if err != nil {
			t.Fatal(err)
		}
		return !excluded
	}

	need := []string{"go.work", "go.work.sum"}
	// Every module go.work uses: its go.mod and go.sum.
	work, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^\s*(\./[^\s)]+)`).FindAllStringSubmatch(string(work), -1) {
		dir := strings.TrimPrefix(m[1], "./")
		need = append(need, dir+"/go.mod")
		if _, err := os.Stat(filepath.Join(root, dir, "go.sum")); err == nil {
			need = append(need, dir+"/go.sum")
		}
	}
	// Everything of pkg/ and services/ but the tests (embedded files too).
	for _, dir := range []string{"pkg", "services"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.HasSuffix(p, "_test.go") || strings.Contains(p, string(filepath.Separator)+"testdata"+string(filepath.Separator)) {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			need = append(need, filepath.ToSlash(rel))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(need) < 50 {
		t.Fatalf("only %d needed files found: the walk is wrong", len(need))
	}
	for _, rel := range need {
		if !inContext(rel) {
			t.Errorf("%s is excluded from the build context, but the build needs it", rel)
		}
	}
	for _, rel := range []string{".git/config", "bin/queue-gateway", "k8s/base/kustomization.yaml", "docker-compose.yml", "deploy/Dockerfile", "deploy/e2e/e2e_test.go", "README.md"} {
		if inContext(rel) {
			t.Errorf("%s is in the build context; the build does not need it", rel)
		}
	}
}
