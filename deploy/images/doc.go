// Package images tests the shipped container images for real: it starts
// each service image built by `make images` the way the Kubernetes
// manifests run it (uid 65532, read-only root filesystem, no privilege
// escalation, every capability dropped) against the local Redis, RabbitMQ
// and PostgreSQL, lists what the image holds, builds deliberately broken
// variants of deploy/Dockerfile to see the checks fail, and runs
// docker-compose.yml's stack with podman.
//
// The tests carry the build tag images, so `make test` compiles none of
// them; `make images-test` builds the images and runs them:
//
//	go test -tags images -count=1 -v ./deploy/images
//
// The scripts beside this file make what a machine without a registry
// needs: local base images (local-bases.sh), the compose file's
// infrastructure images (infra-images.sh), podman's settings
// (podman-setup.sh).
package images
