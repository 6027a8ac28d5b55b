module github.com/waitingroom/waitingroom/deploy/arch

go 1.26.8
