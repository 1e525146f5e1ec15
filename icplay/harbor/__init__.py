"""Harbor / Terminal-Bench task folders: icplay's tasks written out as Harbor tasks
(``export``), and Harbor tasks played in icplay (``load``, ``env``, ``spec``)."""
