# The waiting room. `make help` lists the targets.
SHELL := /bin/bash
GO    ?= go
SERVICES := queue-gateway admission-dispatcher order-service notification-service
BIN := bin


.PHONY: help build test vet fmt fuzz bench gobench chaos demo proto proto-release docs capacity bench-overhead run clean services-up podman images images-test screenshots console-screenshots lighthouse

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-15s %s\n", $$1, $$2}'

build: ## build one static binary per service into bin/
	@mkdir -p $(BIN)
	@test -d "$$($(GO) env GOMODCACHE)/github.com/gin-gonic" || echo "a cold first build: the modules are downloaded and compiled first (a few minutes)"
	@for s in $(SERVICES); do \
	  echo "build $$s"; \
	  CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/$$s ./services/$$s || exit 1; \
	done

vet: ## go vet every module of the workspace (and the image tests, which carry the images build tag)
	$(GO) vet work
	$(GO) vet -tags images ./deploy/images

fmt: ## gofmt the tree
	gofmt -w pkg services

test: vet ## install and start what the tests need (local servers, Chromium), vet, then every test with the race detector
	@deploy/local/services-up.sh --install --tests
	@test -z "$$(gofmt -l pkg services deploy)" || { echo "gofmt needed:"; gofmt -l pkg services deploy; exit 1; }
	$(GO) test -race -count=1 -timeout 15m work
	@# allocation counts hold only without -race: the packages that count them, not the workspace
	@pkgs=$$(grep -rl --include='*_test.go' 'func Test[A-Za-z]*DoesNotAllocate' pkg services | xargs -r -n1 dirname | sort -u | sed 's|^|./|'); \
	  if [ -n "$$pkgs" ]; then echo "$(GO) test -count=1 -run DoesNotAllocate $$pkgs"; $(GO) test -count=1 -run DoesNotAllocate $$pkgs; fi

console-screenshots: ## draw the operators' console (overview, one queue, the sale report) at 1280 px into screenshots/ (not committed)
	@deploy/local/services-up.sh --install --tests --fonts
	E2E_CONSOLE_SHOTS=$(CURDIR)/screenshots $(GO) test -count=1 -run 'TestBrowserConsole' ./deploy/e2e
	@ls -1 screenshots/console-*.png

screenshots: ## draw the waiting page (a person third in line) in English, German, Japanese and Arabic at 1280 and 320 px into screenshots/ (not committed)
	@deploy/local/services-up.sh --install --tests --fonts
	E2E_PAGE_SHOTS=$(CURDIR)/screenshots $(GO) test -count=1 -run 'TestBrowserWaitingRoom/Screenshots' ./deploy/e2e
	@ls -1 screenshots/waiting-*.png

lighthouse: ## Lighthouse on the waiting page's first load in Debian's Chromium (npm, pinned): fails unless accessibility is 100 and performance at least 95 (FORM_FACTOR=desktop, LIGHTHOUSE_MIN_PERFORMANCE)
	@deploy/local/services-up.sh --install --tests
	@deploy/bench/lighthouse.sh

fuzz: ## run every fuzz target of the workspace, each for FUZZTIME (default 30s; FUZZ_MATCH picks by name)
	@GO=$(GO) deploy/fuzz/run.sh

bench: ## install and start what it needs (the local servers, wrk), measure gateway/dispatcher/orders/Redis memory/SSE on this machine, write docs/BENCHMARKS.md and docs/benchmarks.json (the figures make capacity reads; BENCH_QUICK=1 shortens)
	@deploy/local/services-up.sh --install --bench
	@deploy/bench/bench.sh

capacity: ## size every component for a target from the per-core figures make bench wrote (docs/benchmarks.json): WAITING (default 1000000), CAPACITY_FLAGS for the rest (go run ./deploy/capacity -h)
	@$(GO) run ./deploy/capacity $(if $(WAITING),-waiting $(WAITING)) $(CAPACITY_FLAGS)

demo: ## start the stack, run a 2000-user flash sale with deploy/loadgen, print the report, stop the stack
	@deploy/bench/demo.sh

bench-overhead: ## queue-gateway position polls (with and without a ticket) of the working tree against BASE (default 36cd7a8, before tracing): wrk in interleaved pairs, fails if a median ratio new/base is below 0.97 (NEW=<rev> for an A/A run, OVERHEAD_PROFILE=1 for pprof)
	@BASE=$(or $(BASE),36cd7a8) deploy/bench/overhead.sh

gobench: ## the Go benchmarks of the store and handlers against the local servers
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 3s work

chaos: ## fault drills, full form: kills, broker/Redis restarts, database cuts, a 60 s broker outage, Redis failovers (Sentinel lagging and under load, a Cluster master), a partitioned leader, a primary isolated from its sentinels and replicas (split brain), a gateway cut off from the sentinels, each RabbitMQ node of a cluster (make test runs the short forms)
	CHAOS_FULL=1 $(GO) test -tags chaosfull -count=1 -v -timeout 30m ./deploy/chaos
	CHAOS_FULL=1 $(GO) test -count=1 -v -timeout 10m -run 'TestBrokerOutageBoundsTheOutboxAndLosesNoEvent|TestPausedQueueIssuesNothingThenResumesAtTheRate|TestRateHolds|TestTwoHundredQueuesOnOneReplicaEachGetTheirRate|TestShardedQueueAdmitsAtTheQueueRate' ./services/admission-dispatcher/internal/dispatch
	CHAOS_FULL=1 $(GO) test -count=1 -v -timeout 5m -run 'TestStreamsWithTicketsTakePositionsFromTheFrontier' ./services/notification-service/internal/wire
	CHAOS_FULL=1 $(GO) test -count=1 -v -timeout 10m -run 'TestAdaptiveAdmissionFollowsASlowDatabase' ./deploy/e2e

proto: ## regenerate pkg/events/waitingroomv1 from proto/ (buf + protoc-gen-go, fetched with go)
	deploy/proto/gen.sh

proto-release: ## record proto/ as the event contract's last release (proto/releases/waitingroom.v1.json); refused while proto/ breaks it
	$(GO) test ./pkg/events -run '^TestContract$$' -count=1 -update-release

docs: ## write docs/CONFIGURATION.md and the gateway OpenAPI QueueKnobs schema from the config structs' env tags and doc comments (make test fails while they are stale)
	$(GO) run ./deploy/docs

podman: ## install (apt-get) podman, buildah, runc where missing and set them up for a machine without systemd or a registry in reach
	@deploy/images/podman-setup.sh --install

images: ## build the four service images from deploy/Dockerfile with podman or docker, tagged localhost/waitingroom/<service>:dev (local base images where no registry is reachable: deploy/images/local-bases.sh)
	@deploy/images/build.sh

images-test: podman images ## build the images, then run them as the cluster does (uid 65532, read-only root, no capabilities), list their files, break the Dockerfile on purpose, and run docker-compose.yml's stack with podman
	@deploy/images/infra-images.sh
	$(GO) test -tags images -count=1 -v -timeout 30m ./deploy/images

services-up: ## install (apt-get) what is missing and start local Redis, RabbitMQ and PostgreSQL
	@deploy/local/services-up.sh --install

run: build services-up ## run what exists against local servers, dev auth on, demo queue created
	@deploy/local/run.sh

clean: ## remove build output
	rm -rf $(BIN)
