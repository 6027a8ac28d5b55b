module github.com/waitingroom/waitingroom/deploy/docs

go 1.26.8
