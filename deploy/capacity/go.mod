module github.com/waitingroom/waitingroom/deploy/capacity

go 1.26.8
