from auger.frontends.cli import main

raise SystemExit(main())
