from servecap.cli.main import run

run()
