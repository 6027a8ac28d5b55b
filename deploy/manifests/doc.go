// Package manifests holds no code: its tests check the deployment files of
// the repository (deploy/Dockerfile, docker-compose.yml, k8s/ and the Grafana
// dashboard) against the services they deploy.
package manifests
