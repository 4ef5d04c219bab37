from breakwater.cli import main

raise SystemExit(main())
